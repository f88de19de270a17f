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
  const size_t dot = number.find('.');
  if (dot != number.rfind('.')) return std::nullopt;
  // The whole part is exact in integers (a double would round 20000000.5TB's
  // 2e19 and wrap past 2^63); only the fraction of one unit, below 2^40
  // bytes, goes through a long double, whose 64-bit mantissa holds it.
  const std::string_view whole = number.substr(0, dot);
  const std::string_view fraction = number.substr(dot + 1);
  uint64_t units = 0;
  auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), units);
  if (ec != std::errc() || end != whole.data() + whole.size()) return std::nullopt;
  if (units != 0 && multiplier > UINT64_MAX / units) return std::nullopt;
  long double part = 0.0L;
  long double scale = 1.0L;
  for (char digit : fraction) {  // digits only: the scan above took nothing else
    scale /= 10.0L;
    part += static_cast<long double>(digit - '0') * scale;
  }
  const uint64_t rest = static_cast<uint64_t>(
      std::floor(part * static_cast<long double>(multiplier) + 0.5L));  // <= multiplier
  const uint64_t base = units * multiplier;
  if (rest > UINT64_MAX - base) return std::nullopt;
  return base + rest;
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
