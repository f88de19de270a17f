// exp_approx: a branch-free exp for one float, eight or sixteen at once, the same
// operations (hence the same bits per lane) either way, so a scalar loop
// under `omp simd` and a GCC-vector kernel agree. Used by cpu attention's
// softmax and swiglu's sigmoid; always inlined, so a caller compiled for a
// wider ISA (a target_clones clone) gets it in that ISA.
#pragma once

#include <bit>
#include <cstdint>

#include "backend/cpu/simd_vectors.h"

// The v8f and v16f overloads return 32- and 64-byte vectors by value; on a baseline (SSE)
// build GCC warns that such a call's ABI differs from an AVX build's. They
// are always inlined, so no such call exists (attention_kernels.h says more).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace headroom::cpu_simd {

// exp(x) to about 2 ulp (Cephes expf: x = n ln2 + r, |r| <= ln2 / 2, a
// degree-6 polynomial for e^r, then 2^n from the exponent bits), without
// calls or branches, for a float, eight or sixteen at once (the same operations, so
// the same bits per lane). x is clamped to [-87, 88], the normal range, so
// the result is never 0 or inf (exp(-87) ~ 1.6e-38, exp(88) ~ 1.7e38):
// attention sets masked elements to 0 itself, never via exp(-inf); swiglu's
// sigmoid is as close to 0 or 1 there as fp32 can tell. NaN stays NaN (the
// clamps compare false).
//
// n is rounded by adding 1.5 * 2^23 (ulp 1 there): t = shifter + n exactly,
// and t's bits are the shifter's plus n, so 2^n comes from integer bits
// without a float -> int conversion (undefined for NaN). Unsigned
// arithmetic: wrapping is what the two's-complement n needs.
inline constexpr float kExpShifter = 12582912.0f;
HR_SIMD_INLINE float pow2_of_shifted(float t) {
  constexpr uint32_t kBias = std::bit_cast<uint32_t>(kExpShifter) - 127u;
  return std::bit_cast<float>((std::bit_cast<uint32_t>(t) - kBias) << 23);
}
template <typename V, typename U>
HR_SIMD_INLINE V pow2_of_shifted_lanes(const V& t) {
  constexpr uint32_t kBias = std::bit_cast<uint32_t>(kExpShifter) - 127u;
  U bits;
  __builtin_memcpy(&bits, &t, sizeof bits);
  bits = (bits - kBias) << 23;
  V v;
  __builtin_memcpy(&v, &bits, sizeof v);
  return v;
}
HR_SIMD_INLINE v8f pow2_of_shifted(const v8f& t) {
  return pow2_of_shifted_lanes<v8f, v8u32>(t);
}
HR_SIMD_INLINE v16f pow2_of_shifted(const v16f& t) {
  return pow2_of_shifted_lanes<v16f, v16u32>(t);
}
// The float overload selects with bit masks, not `?:`: GCC threads the two
// clamps' comparisons into branches, and a loop with branches is not
// vectorized, `omp simd` or not (swiglu's was not).
HR_SIMD_INLINE float select_less(float x, float bound, float then) {
  const uint32_t take = 0u - static_cast<uint32_t>(x < bound);
  return std::bit_cast<float>((take & std::bit_cast<uint32_t>(then)) |
                              (~take & std::bit_cast<uint32_t>(x)));
}
HR_SIMD_INLINE v8f select_less(const v8f& x, float bound, float then) {
  return x < bound ? v8f{} + then : x;
}
HR_SIMD_INLINE v16f select_less(const v16f& x, float bound, float then) {
  return x < bound ? v16f{} + then : x;
}
template <typename V>
HR_SIMD_INLINE V exp_approx(const V& x_in) {
  V x = select_less(x_in, -87.0f, -87.0f);
  x = -select_less(-x, -88.0f, -88.0f);
  const V t = x * 1.44269504088896341f + kExpShifter;
  const V n = t - kExpShifter;
  V r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * pow2_of_shifted(t);
}

}  // namespace headroom::cpu_simd

#pragma GCC diagnostic pop
