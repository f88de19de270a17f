// bitsandbytes' dynamic quantization maps, the code books of its 8-bit
// optimizers (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", 2022), written from bitsandbytes 0.50's
// functional.create_dynamic_map(signed, max_exponent_bits=7, total_bits=8):
//
//   for i in 0..6:                      (the decimal exponent: 10^(i-6))
//     n = 2^i + 1 (signed) or 2^(i+1) + 1 (unsigned)
//     b = linspace(0.1, 1, n) (fp32);  means = (b[:-1] + b[1:]) / 2
//     values += 10^(i-6) * means   (and, signed, their negatives)
//   values += [0, 1];  sorted ascending
//
// 254 + 2 = 256 values either way: the signed map (for Adam's m) spans
// [-0.99, 1] with no -1, the unsigned one (for v) [0, 1]; both are dense
// near 0, where most normalized moments lie. The arithmetic is fp32, in
// the scalar order of torch's linspace (the first half counted from the
// start, the second half back from the end): torch 1.13 on an AVX-512 cpu
// gives 422 of the 512 values bit for bit and the other 90 one fp32 ulp
// away (its vectorized linspace steps from each vector's first element, so
// its own last bits depend on the cpu's vector width).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "backend/common/rng.h"  // HEADROOM_HOST_DEVICE

namespace headroom {

// Elements per absmax block of bitsandbytes' blockwise 8-bit optimizers.
inline constexpr int64_t kQuantBlock = 256;

// The 256 values, ascending: signed (m) or unsigned (v).
const std::array<float, 256>& dynamic_map(bool is_signed);

// The code of the value of `map` nearest x (x normalized by its block's
// absmax, so in [-1, 1]; ties go to the lower code). For the signed map
// the code keeps x's sign bit, as bitsandbytes' kernel makes it (a code of
// the other sign is stepped one towards x's side): a small negative
// momentum gets the smallest negative value, not 0; a small positive one
// may get 0.
//
// Inline and branch-free, so that the loops calling it (the 8-bit
// optimizer's requantization, cloned for AVX2 / AVX-512) vectorize, with
// gathers for the table reads: a std::lower_bound per element, out of line,
// mispredicted its branches on random moments and took most of an 8-bit
// AdamW step (bench/RESULTS.md).
// `map` is the std::array of dynamic_map() on the cpu, and an array of
// the same 256 values in shared memory in the cuda kernels (cuda/
// adamw8bit.cu, nf4.cu), so that both compute the same codes.
template <typename Map>
HEADROOM_HOST_DEVICE inline __attribute__((always_inline)) uint8_t quantize_to_map(const Map& map,
                                                                                   bool is_signed,
                                                                                   float x) {
  // upper: the first value >= x (256: none), by a binary search whose every
  // step is a select. Before the step of `width` the answer lies in
  // [upper, upper + 2 * width]; the steps are written out, since GCC does not
  // vectorize a loop with a loop inside.
  // Every condition is used as 0 or 1 (bool arithmetic, `&` rather than
  // `&&`): a `?:` here became a branch, and a loop with one is not
  // vectorized.
  int32_t upper = 0;
  const auto step = [&](int32_t width) {
    upper += width * static_cast<int32_t>(map[static_cast<size_t>(upper + width)] < x);
  };
  step(128);
  step(64);
  step(32);
  step(16);
  step(8);
  step(4);
  step(2);
  step(1);
  upper += static_cast<int32_t>(map[static_cast<size_t>(upper)] < x);
  // The nearer of the values either side of x (ties: the lower). At the
  // ends the comparison picks 0 or 255 by itself, except for a NaN x, which
  // compares false everywhere: it gets code 0.
#if defined(__CUDA_ARCH__)
  const int32_t right = min(max(upper, int32_t{1}), int32_t{255});  // CUDA's int min / max
#else
  const int32_t right = std::min(std::max(upper, int32_t{1}), int32_t{255});
#endif
  const float below = map[static_cast<size_t>(right - 1)], above = map[static_cast<size_t>(right)];
  int32_t code = right - static_cast<int32_t>(x - below <= above - x);
  code *= static_cast<int32_t>(upper != 0);
  if (is_signed) {
    const float q = map[static_cast<size_t>(code)];
    code += static_cast<int32_t>((x > 0) & (q < 0));
    code -= static_cast<int32_t>((x < 0) & (q >= 0));
  }
  return static_cast<uint8_t>(code);
}

}  // namespace headroom
