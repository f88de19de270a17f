// The Unicode services the tokenizer needs, over UTF-8, all from ICU: UTF-8
// validation, NFC, the character properties HF's added-token matching tests
// (Rust's char::is_whitespace and char::is_alphanumeric), and lossy decoding.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace headroom {

// The byte offset of the first ill-formed UTF-8 sequence in `text` (a stray
// continuation byte, a truncated or overlong sequence, a surrogate, a code
// point past U+10FFFF), or nullopt when all of it is well-formed.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// `text` (well-formed UTF-8) in Normalization Form C.
std::string to_nfc(std::string_view text);

// Well-formed UTF-8 from any bytes: each maximal ill-formed subpart becomes
// U+FFFD, as Rust's String::from_utf8_lossy (and so HF's decoders) does it.
std::string utf8_lossy(std::string_view bytes);

// The code point that ends / starts `text` (well-formed UTF-8, not empty).
char32_t last_code_point(std::string_view text);
char32_t first_code_point(std::string_view text);

// Unicode White_Space (Rust's char::is_whitespace).
bool is_white_space(char32_t c);

// Alphabetic or a number (Nd, Nl, No) (Rust's char::is_alphanumeric).
bool is_alphanumeric(char32_t c);

}  // namespace headroom
