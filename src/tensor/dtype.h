// Element types and the bf16 conversions every backend shares.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace headroom {

enum class DType : uint8_t { kF32, kBF16, kI32, kI64, kU8 };

size_t size_of(DType dtype);
std::string_view name_of(DType dtype);  // "fp32", "bf16", "int32", "int64", "uint8"
std::optional<DType> parse_dtype(std::string_view name);
inline bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16;
}

// bfloat16 storage: the top 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits;
};

// Round to nearest even, as PyTorch and oneDNN do; NaN stays NaN.
inline bf16 to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}

inline float to_float(bf16 value) {
  uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace headroom
