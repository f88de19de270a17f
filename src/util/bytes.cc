#include "util/bytes.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace headroom {

namespace {

struct Unit {
  std::string_view suffix;
  uint64_t multiplier;
};

constexpr std::array<Unit, 14> kUnits = {{
    {"B", 1},
    {"KiB", kKiB},
    {"MiB", kMiB},
    {"GiB", kGiB},
    {"TiB", kTiB},
    {"kB", 1000},
    {"KB", 1000},
    {"MB", 1000ull * 1000},
    {"GB", 1000ull * 1000 * 1000},
    {"TB", 1000ull * 1000 * 1000 * 1000},
    {"K", kKiB},  // the forms nvidia-smi and PYTORCH_CUDA_ALLOC_CONF users type
    {"M", kMiB},
    {"G", kGiB},
    {"T", kTiB},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<uint64_t> parse_bytes(std::string_view text) {
  text = trim(text);
  size_t digits_end = 0;
  while (digits_end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits_end])) || text[digits_end] == '.'))
    ++digits_end;
  std::string_view number = text.substr(0, digits_end);
  std::string_view suffix = trim(text.substr(digits_end));
  if (number.empty() || number.front() == '.' || number.back() == '.') return std::nullopt;

  uint64_t multiplier = 0;
  if (suffix.empty()) {
    multiplier = 1;
  } else {
    for (const Unit& u : kUnits)
      if (u.suffix == suffix) multiplier = u.multiplier;
  }
  if (multiplier == 0) return std::nullopt;

  if (number.find('.') == std::string_view::npos) {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
    if (value != 0 && multiplier > UINT64_MAX / value) return std::nullopt;
    return value * multiplier;
  }
  // A fraction only makes sense with a unit: "1.5" bytes is not a size.
  if (suffix.empty() || suffix == "B") return std::nullopt;
  if (number.find('.') != number.rfind('.')) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
  long double total = static_cast<long double>(value) * static_cast<long double>(multiplier);
  if (total >= 18446744073709551615.0L) return std::nullopt;
  return static_cast<uint64_t>(std::llround(static_cast<double>(total)));
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<std::pair<std::string_view, uint64_t>, 4> kSteps = {{
      {"TiB", kTiB},
      {"GiB", kGiB},
      {"MiB", kMiB},
      {"KiB", kKiB},
  }};
  for (const auto& [name, size] : kSteps) {
    if (bytes >= size) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f %s",
                    static_cast<double>(bytes) / static_cast<double>(size),
                    std::string(name).c_str());
      return buf;
    }
  }
  return std::to_string(bytes) + " B";
}

std::string format_bytes_exact(uint64_t bytes) {
  if (bytes < kKiB) return std::to_string(bytes) + " B";
  return format_bytes(bytes) + " (" + std::to_string(bytes) + " B)";
}

}  // namespace headroom
