#include "tokenizer/byte_level.h"

#include <array>

namespace headroom {

namespace {

struct Alphabet {
  std::array<char32_t, 256> char_of{};  // byte -> code point
  std::array<char, 256 * 2> utf8{};     // byte -> its code point in UTF-8, 2 bytes each
  std::array<uint8_t, 256> utf8_size{};
  std::array<int16_t, 512> byte_of{};  // code point (all below 512) -> byte, -1 = none

  Alphabet() {
    byte_of.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = printable(b) ? static_cast<char32_t>(b) : next++;
      char_of[static_cast<size_t>(b)] = c;
      byte_of[c] = static_cast<int16_t>(b);
      char* out = &utf8[static_cast<size_t>(b) * 2];
      if (c < 0x80) {
        out[0] = static_cast<char>(c);
        utf8_size[static_cast<size_t>(b)] = 1;
      } else {  // every code point of the alphabet is below U+0800
        out[0] = static_cast<char>(0xC0 | (c >> 6));
        out[1] = static_cast<char>(0x80 | (c & 0x3F));
        utf8_size[static_cast<size_t>(b)] = 2;
      }
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string_view byte_level_char(uint8_t byte) {
  const Alphabet& a = alphabet();
  return {&a.utf8[size_t{byte} * 2], a.utf8_size[byte]};
}

std::optional<uint8_t> byte_level_byte(char32_t c) {
  const Alphabet& a = alphabet();
  if (c >= a.byte_of.size() || a.byte_of[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(a.byte_of[c]);
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const auto lead = static_cast<uint8_t>(token[i]);
    char32_t c;
    if (lead < 0x80) {
      c = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < token.size()) {
      c = (char32_t{lead & 0x1Fu} << 6) | (static_cast<uint8_t>(token[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // 3- and 4-byte characters are all outside the alphabet
    }
    const std::optional<uint8_t> byte = byte_level_byte(c);
    if (!byte) return std::nullopt;
    bytes.push_back(static_cast<char>(*byte));
  }
  return bytes;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes)
    out += byte_level_char(static_cast<uint8_t>(b));
  return out;
}

}  // namespace headroom
