// adamw_update: one AdamW step (decoupled weight decay, bias-corrected) on a
// flat parameter group, in the order and form of PyTorch's torch.optim.AdamW
// (single-tensor path), with t = params.step (1-based) and g the gradient
// times params.grad_scale:
//   p  = p * (1 - lr * wd)                         decay first, on the old p
//   m  = lerp(m, g, 1 - beta1)                      = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// (= p - lr * (m_hat / (sqrt(v_hat) + eps) + wd * p_old)). The scalars
// (1 - lr * wd, lr / bc1, sqrt(bc2)) are computed in double and rounded to
// fp32, as PyTorch turns its Python floats into an fp32 kernel's scalars;
// the per-element math is fp32, in PyTorch's operation order (lerp_ for m,
// addcmul_ for v, addcdiv_ for p).
//
// param (N) fp32: updated in place; master must be undefined.
// param (N) bf16: the update is computed in fp32 on master (N) fp32 or
// bf16, and param = bf16(master), so with an fp32 master steps below half a
// bf16 ulp still accumulate; with master undefined it is computed on param
// itself and rounded into it (the cases of cpu/weight_update.h).
// grad (N) param's dtype; m, v (N) fp32 optimizer state, updated in place.
// Elementwise: deterministic for any thread count.
// Allocates: nothing.
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/common/adamw_scalars.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/weight_update.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

struct Scalars {
  float decay;      // 1 - lr * wd
  float step_size;  // lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float one_minus_beta1, beta2, one_minus_beta2, eps, grad_scale;
  uint32_t lerp_from_m;  // all ones when 1 - beta1 < 0.5: lerp's choice, as a mask
};

Scalars scalars_of(const AdamWParams& p) {
  Scalars s{};
  set_adamw_scalars(p, s);
  s.lerp_from_m = s.one_minus_beta1 < 0.5f ? ~0u : 0u;
  return s;
}

// The fp32 update of one element; returns the new parameter value.
inline __attribute__((always_inline)) float step(float p, float g, float& m, float& v,
                                                 const Scalars& s) {
  g *= s.grad_scale;
  p *= s.decay;
  // PyTorch's lerp: the choice keeps the result exact at both ends. Both
  // sides are computed and one selected by a mask (the same for every
  // element): a `?:` here becomes a branch, and the loop is not vectorized.
  const float w = s.one_minus_beta1;
  const float from_m = m + w * (g - m), from_g = g - (g - m) * (1.0f - w);
  m = std::bit_cast<float>((s.lerp_from_m & std::bit_cast<uint32_t>(from_m)) |
                           (~s.lerp_from_m & std::bit_cast<uint32_t>(from_g)));
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  float denominator = std::sqrt(v) / s.bc2_sqrt + s.eps;
  return p - s.step_size * m / denominator;
}

// Elements [begin, end) of one group, the weights through `w`
// (cpu/weight_update.h: its cases resolved at compile time, so the loop
// vectorizes; sqrt and division are IEEE in every lane: the same bits).
template <typename P, typename M>
HR_CPU_CLONES void update_range(WeightUpdate<P, M> w, const P* grad, float* m, float* v,
                                const Scalars s, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    w.store(i, step(w.load(i), widen(grad[i]), m[i], v[i], s));
}

}  // namespace

void CpuKernels::adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                              Tensor& v, const AdamWParams& params) {
  const Scalars s = scalars_of(params);
  const int64_t n = param.numel();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  with_weight_update(param, master, grad, [&](auto w, const auto* g) {
    for_each_thread_range(n, n >= kMinParallelElements,
                          [&](int64_t b, int64_t e) { update_range(w, g, pm, pv, s, b, e); });
  });
}

}  // namespace headroom
