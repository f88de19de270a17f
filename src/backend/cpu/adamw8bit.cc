// adamw8bit_update: one step of bitsandbytes' blockwise 8-bit AdamW
// (bnb.optim.AdamW8bit; the CUDA kernel kOptimizerStatic8bit2StateBlockwise
// <ADAM, T, 256, 1> of bitsandbytes 0.50), per block of 256 elements b:
//   m = map_s[m_code] * m_absmax[b],  v = map_u[v_code] * v_absmax[b]   dequantize
//   g *= grad_scale
//   v = v * beta2 + (1 - beta2) * g * g
//   m = m * beta1 + (1 - beta1) * g
//   p = p + step_size * (m / (sqrt(v) + c2 * eps))    step_size = -lr * c2 / c1
//   p = p * (1 - lr * wd)                             decay after the update, as bnb's kernel
//   m_absmax[b] = max |m|, v_absmax[b] = max |v| over the block
//   m_code = quantize(map_s, m / m_absmax[b]), v_code = quantize(map_u, v / v_absmax[b])
// with c1 = 1 - beta1^t, c2 = sqrt(1 - beta2^t), the maps and quantize() of
// backend/common/dynamic_map.h (a block whose absmax is 0 stores the code
// of 0). Scalars are computed in double and rounded to fp32; bnb's kernel
// computes them in fp32 with __powf: they differ by an ulp at most.
//
// param, master, grad as for adamw_update (cpu/weight_update.h); m, v (N)
// uint8 codes, m_absmax, v_absmax (ceil(N / 256)) fp32, the last block
// partial. Blocks are independent: deterministic for any thread count.
// Cloned (cpu/cpu_clones.h), so each pass over a block vectorizes.
// Allocates: nothing.
#include <algorithm>
#include <array>
#include <cmath>

#include "backend/common/adamw_scalars.h"
#include "backend/common/dynamic_map.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/exp_approx.h"
#include "backend/cpu/weight_update.h"

namespace headroom {

namespace {

using cpu_simd::v8f;
using cpu_simd::v8u32;

struct Scalars8bit {
  float step_size;  // -lr * c2 / c1
  float c2_eps;     // c2 * eps
  float decay;      // 1 - lr * wd (1 without weight decay)
  float beta1, beta2, one_minus_beta1, one_minus_beta2, grad_scale;
  const std::array<float, 256>* map_s;
  const std::array<float, 256>* map_u;
  uint8_t zero_s, zero_u;
};

// max |x[i]| over i < n, NaNs skipped, as a loop of m = std::max(m, |x[i]|)
// skips them; in 8 lanes and then across them. A lane takes a value only
// when it compares greater, so the order of the comparisons cannot change
// the result: this is that loop's answer to the bit. (The loop itself is a
// reduction GCC does not vectorize without -ffinite-math-only.)
HR_SIMD_INLINE float abs_max(const float* x, int64_t n) {
  constexpr uint32_t kMagnitude = 0x7fffffffu;
  v8f lanes{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8u32 bits;
    __builtin_memcpy(&bits, x + i, sizeof bits);
    bits &= kMagnitude;
    v8f a;
    __builtin_memcpy(&a, &bits, sizeof a);
    lanes = lanes < a ? a : lanes;
  }
  float largest = 0.0f;
  for (int l = 0; l < 8; ++l)
    largest = std::max(largest, lanes[l]);
  for (; i < n; ++i)
    largest = std::max(largest, std::fabs(x[i]));
  return largest;
}

// codes[j] = the code of values[j] / absmax in `map` for j < count (a loop
// that vectorizes, with gathers); all `zero` when absmax is 0.
template <bool kSigned>
HR_SIMD_INLINE void requantize(const float* values, int64_t count, float absmax,
                               const std::array<float, 256>& map, uint8_t zero, uint8_t* codes) {
  if (absmax > 0) {
#pragma omp simd
    for (int64_t j = 0; j < count; ++j)
      codes[j] = quantize_to_map(map, kSigned, values[j] / absmax);
  } else {
    std::fill(codes, codes + count, zero);
  }
}

// Blocks [b0, b1) of one group, the weights through `w` (cpu/weight_update.h).
// Each pass over a block is a loop of its own, so each vectorizes (the
// dequantization and the codes with gathers from the maps).
template <typename P, typename M>
HR_CPU_CLONES void update_blocks(WeightUpdate<P, M> w, const P* grad, uint8_t* mc, uint8_t* vc,
                                 float* ma, float* va, int64_t n, const Scalars8bit s, int64_t b0,
                                 int64_t b1) {
  const std::array<float, 256>& map_s = *s.map_s;
  const std::array<float, 256>& map_u = *s.map_u;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t lo = b * kQuantBlock, count = std::min(n - lo, kQuantBlock);
    float ms[kQuantBlock], vs[kQuantBlock];
    const float m_scale = ma[b], v_scale = va[b];
#pragma omp simd
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = lo + j;
      const float gi = widen(grad[i]) * s.grad_scale;
      float vi = map_u[vc[i]] * v_scale;
      vi = vi * s.beta2 + s.one_minus_beta2 * gi * gi;
      float mi = map_s[mc[i]] * m_scale;
      mi = mi * s.beta1 + s.one_minus_beta1 * gi;
      ms[j] = mi;
      vs[j] = vi;
    }
#pragma omp simd
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = lo + j;
      float p = w.load(i) + s.step_size * (ms[j] / (std::sqrt(vs[j]) + s.c2_eps));
      p *= s.decay;  // 1 when weight decay is off: exact
      w.store(i, p);
    }
    const float m_max = abs_max(ms, count), v_max = abs_max(vs, count);
    ma[b] = m_max;
    va[b] = v_max;
    requantize<true>(ms, count, m_max, map_s, s.zero_s, mc + lo);
    requantize<false>(vs, count, v_max, map_u, s.zero_u, vc + lo);
  }
}

}  // namespace

void CpuKernels::adamw8bit_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                                  Tensor& v, Tensor& m_absmax, Tensor& v_absmax,
                                  const AdamWParams& params) {
  Scalars8bit s{};
  set_adamw8bit_scalars(params, s);
  s.map_s = &dynamic_map(true);
  s.map_u = &dynamic_map(false);

  uint8_t* mc = m.data<uint8_t>();
  uint8_t* vc = v.data<uint8_t>();
  float* ma = m_absmax.data<float>();
  float* va = v_absmax.data<float>();
  const int64_t n = param.numel();
  const int64_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
  with_weight_update(param, master, grad, [&](auto w, const auto* g) {
    for_each_thread_range(blocks, n >= kMinParallelElements, [&](int64_t b0, int64_t b1) {
      update_blocks(w, g, mc, vc, ma, va, n, s, b0, b1);
    });
  });
}

}  // namespace headroom
