// Byte quantities as people write them in configs and read them in reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headroom {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kTiB = 1024 * kGiB;

// Parses "80GiB", "80GB", "512MiB", "1.5GiB", "4096", "4096B", "2 MiB".
// Binary suffixes (KiB MiB GiB TiB) are powers of 1024, decimal ones (kB KB MB
// GB TB) powers of 1000, as on GPU spec sheets vs nvidia-smi. Fractions are
// allowed with a suffix and are rounded to the nearest whole byte. The
// largest size is 2^64 - 1 bytes (16 EiB, about "18446744TB"). Returns nullopt
// for anything else (empty, a sign, exponents, nan / inf, an unknown unit or
// trailing text, more than 2^64 - 1 bytes), so the caller can name the key
// in its error.
std::optional<uint64_t> parse_bytes(std::string_view text);

// "970.0 MiB", "77.3 GiB", "512 B": one decimal, the largest binary unit that
// keeps the number >= 1.
std::string format_bytes(uint64_t bytes);

// "77.3 GiB (83006016512 B)": for the figures a user compares against.
std::string format_bytes_exact(uint64_t bytes);

}  // namespace headroom
