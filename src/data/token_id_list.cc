#include "data/token_id_list.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>

#include "util/error.h"

namespace headroom {

std::vector<int32_t> parse_token_id_list(const std::string& text, const std::string& where) {
  std::vector<int32_t> ids;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
  };
  auto fail = [&](const std::string& expected) -> UsageError {
    const std::string got =
        i < text.size() ? "\"" + text.substr(i, 20) + "\"" : std::string("the end of the input");
    return UsageError(where + ": byte " + std::to_string(i) + ": expected " + expected + ", got " +
                      got);
  };
  auto number = [&] {
    if (i >= text.size() || text[i] == ',' || text[i] == ']') throw fail("a token id");
    const size_t start = i;
    if (i < text.size() && text[i] == '-') ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
      ++i;
    const std::string digits = text.substr(start, i - start);
    long long value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    const bool separated = i == text.size() || std::isspace(static_cast<unsigned char>(text[i])) ||
                           text[i] == ',' || text[i] == ']';
    if (digits.empty() || digits == "-" || !separated) {
      i = start;
      while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) &&
             text[i] != ',' && text[i] != ']')
        ++i;
      throw UsageError(where + ": byte " + std::to_string(start) + ": \"" +
                       text.substr(start, std::min<size_t>(i - start, 20)) +
                       "\" is not a token id");
    }
    if (ec != std::errc() || end != digits.data() + digits.size() || value < 0 || value > INT32_MAX)
      throw UsageError(where + ": byte " + std::to_string(start) + ": " + digits.substr(0, 20) +
                       " is not a token id");
    ids.push_back(static_cast<int32_t>(value));
  };

  skip_space();
  const bool array = i < text.size() && text[i] == '[';
  if (array) {
    ++i;
    skip_space();
    if (i < text.size() && text[i] == ']') {
      ++i;
    } else {
      for (;;) {
        number();
        skip_space();
        if (i < text.size() && text[i] == ']') {
          ++i;
          break;
        }
        if (i >= text.size() || text[i] != ',') throw fail("',' or ']'");
        ++i;
        skip_space();
      }
    }
    skip_space();
    if (i < text.size()) throw fail("nothing after the array's ']'");
    return ids;
  }
  while (i < text.size()) {
    number();
    skip_space();
    if (i < text.size() && text[i] == ',') {
      ++i;
      skip_space();
      if (i >= text.size()) throw fail("a token id after ','");
    }
  }
  return ids;
}

}  // namespace headroom
