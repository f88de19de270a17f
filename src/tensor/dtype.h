// Element types and the bf16 / fp16 conversions every backend shares.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace headroom {

// kF16 is last so that the codes of the others stay what files hold.
enum class DType : uint8_t { kF32, kBF16, kI32, kI64, kU8, kF16 };

size_t size_of(DType dtype);
std::string_view name_of(DType dtype);  // "fp32", "bf16", "int32", "int64", "uint8", "fp16"
std::optional<DType> parse_dtype(std::string_view name);
inline bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}
// The 16-bit floating dtypes: stored narrow, computed in fp32.
inline bool is_half(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16;
}

// bfloat16 storage: the top 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits;
};

// Round to nearest even, as PyTorch and oneDNN do; NaN stays NaN (quiet).
// Both results are computed and one selected, without a branch, so a loop
// storing bf16 vectorizes (a branch here kept every kernel's store scalar).
inline bf16 to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return bf16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

inline float to_float(bf16 value) {
  uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// IEEE 754 binary16 storage (CUDA's __half, torch.float16): 5 exponent
// bits, 10 mantissa bits, largest finite 65504, subnormals down to 2^-24.
struct f16 {
  uint16_t bits;
};

// Round to nearest even, as PyTorch's and the hardware's conversion: at or
// above 65520 (half way past 65504) to inf, below 2^-14 to a subnormal, NaN
// stays NaN (quiet).
inline f16 to_f16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu))};
  if (x >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};
  if (x >= 0x38800000u) {
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits; a
    // carry out of the mantissa steps the exponent, as it should.
    uint32_t m = x - 0x38000000u;
    m += 0x0fffu + ((m >> 13) & 1u);
    return f16{static_cast<uint16_t>(sign | (m >> 13))};
  }
  // Subnormal: the value in units of 2^-24, rounded to an integer (to
  // nearest even); 1024 units is the smallest normal, encoded alike.
  float magnitude;
  std::memcpy(&magnitude, &x, sizeof magnitude);
  const float units = magnitude * 16777216.0f;  // exact: a power of two
  auto whole = static_cast<uint32_t>(units);
  const float rest = units - static_cast<float>(whole);
  if (rest > 0.5f || (rest == 0.5f && (whole & 1u))) ++whole;
  return f16{static_cast<uint16_t>(sign | whole)};
}

inline float to_float(f16 value) {
  const uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000u) << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1fu, mantissa = value.bits & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // mantissa * 2^-24
    std::memcpy(&bits, &magnitude, sizeof bits);
    bits |= sign;
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace headroom
