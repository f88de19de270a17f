#include "tokenizer/unicode_text.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "util/error.h"

namespace headroom {

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int64_t>(text.size());
  for (int64_t i = 0; i < length;) {
    if (s[i] < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    const int64_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);  // c < 0 for every ill-formed sequence, surrogates included
    if (c < 0) return static_cast<size_t>(start);
  }
  return std::nullopt;
}

std::string to_nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw InternalError(std::string("ICU NFC: ") + u_errorName(status));
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw InternalError(std::string("ICU NFC: ") + u_errorName(status));
  return out;
}

std::string utf8_lossy(std::string_view bytes) {
  if (!find_invalid_utf8(bytes)) return std::string(bytes);
  // ICU substitutes U+FFFD per maximal subpart (Unicode 3.9, "best practice").
  std::string out;
  icu::UnicodeString::fromUTF8(icu::StringPiece(bytes.data(), static_cast<int32_t>(bytes.size())))
      .toUTF8String(out);
  return out;
}

char32_t last_code_point(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  auto i = static_cast<int32_t>(text.size());
  UChar32 c;
  U8_PREV(s, 0, i, c);
  return static_cast<char32_t>(c);
}

char32_t first_code_point(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  int32_t i = 0;
  UChar32 c;
  U8_NEXT(s, i, static_cast<int32_t>(text.size()), c);
  return static_cast<char32_t>(c);
}

bool is_white_space(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool is_alphanumeric(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(u);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

}  // namespace headroom
