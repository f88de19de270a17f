#include "config/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace headroom {

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        // TOML forbids raw control characters in basic strings; UTF-8 bytes
        // (>= 0x80) pass through as they are.
        if (byte < 0x20 || byte == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04X", static_cast<unsigned>(byte));
          out += escaped;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string toml_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  // Shortest round-trip digits, fixed notation for exponents -4..16 as %g
  // would: "0.0003", "0.95", "1e-08".
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

namespace {

std::string two_digits(unsigned value) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%02u", value);
  return buffer;
}

std::string render_date(const toml::date& d) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%04u-", static_cast<unsigned>(d.year));
  return buffer + two_digits(d.month) + "-" + two_digits(d.day);
}

std::string render_time(const toml::time& t) {
  std::string text = two_digits(t.hour) + ":" + two_digits(t.minute) + ":" + two_digits(t.second);
  if (t.nanosecond != 0) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, ".%09u", static_cast<unsigned>(t.nanosecond));
    text += buffer;
  }
  return text;
}

std::string render_date_time(const toml::date_time& dt) {
  std::string text = render_date(dt.date) + "T" + render_time(dt.time);
  if (dt.offset) {
    int minutes = dt.offset->minutes;
    if (minutes == 0) return text + "Z";
    text += minutes < 0 ? '-' : '+';
    minutes = std::abs(minutes);
    text += two_digits(static_cast<unsigned>(minutes / 60)) + ":" +
            two_digits(static_cast<unsigned>(minutes % 60));
  }
  return text;
}

}  // namespace

std::string toml_render(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return toml_quote(node.as_string()->get());
    case toml::node_type::integer:
      return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point:
      return toml_float(node.as_floating_point()->get());
    case toml::node_type::boolean:
      return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::date:
      return render_date(node.as_date()->get());
    case toml::node_type::time:
      return render_time(node.as_time()->get());
    case toml::node_type::date_time:
      return render_date_time(node.as_date_time()->get());
    case toml::node_type::array: {
      std::string text = "[";
      for (const toml::node& element : *node.as_array()) {
        if (text.size() > 1) text += ", ";
        text += toml_render(element);
      }
      return text + "]";
    }
    case toml::node_type::table: {
      std::string text = "{";
      for (auto&& [key, value] : *node.as_table()) {
        text += text.size() > 1 ? ", " : " ";
        text += std::string(key.str()) + " = " + toml_render(value);
      }
      return text + (text.size() > 1 ? " }" : "}");
    }
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string toml_describe(const toml::node& node) {
  std::string_view type = "value";
  switch (node.type()) {
    case toml::node_type::string:
      type = "string";
      break;
    case toml::node_type::integer:
      type = "integer";
      break;
    case toml::node_type::floating_point:
      type = "float";
      break;
    case toml::node_type::boolean:
      type = "boolean";
      break;
    case toml::node_type::date:
      type = "date";
      break;
    case toml::node_type::time:
      type = "time";
      break;
    case toml::node_type::date_time:
      type = "date-time";
      break;
    case toml::node_type::array:
      type = "array";
      break;
    case toml::node_type::table:
      type = "table";
      break;
    case toml::node_type::none:
      break;
  }
  return std::string(type) + " " + toml_render(node);
}

std::string quoted_choices(const std::vector<std::string_view>& choices) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) text += i + 1 == choices.size() ? " or " : ", ";
    text += toml_quote(choices[i]);
  }
  return text;
}

namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transpositions,
// the typo people make most ("stpes").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> nearest_word(std::string_view word,
                                        const std::vector<std::string_view>& candidates) {
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, word.size() / 4));
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (std::string_view candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(candidate);
    }
  }
  return best;
}

}  // namespace headroom
