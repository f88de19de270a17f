// The byte-level alphabet of GPT-2 style BPE (HF `ByteLevel`): every byte
// 0..255 is spelled as one printable Unicode character so that a vocabulary
// of strings can hold arbitrary bytes. Printable Latin-1 bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes, in order, are
// U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headroom {

// The character that spells `byte`, as UTF-8 (2 bytes at most).
std::string_view byte_level_char(uint8_t byte);

// The byte a character of the alphabet spells; nullopt for any other code point.
std::optional<uint8_t> byte_level_byte(char32_t c);

// The bytes a vocabulary entry spells, or nullopt when one of its characters
// is outside the alphabet (HF's ByteLevel decoder then keeps the entry's own
// UTF-8, e.g. for an added token "<|im_start|> ").
std::optional<std::string> byte_level_decode(std::string_view token);

// `bytes` spelled in the alphabet: the inverse of byte_level_decode.
std::string byte_level_encode(std::string_view bytes);

}  // namespace headroom
