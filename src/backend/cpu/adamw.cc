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
// itself and rounded into it (cpu/weight_update.h).
// grad (N) param's dtype; m, v (N) fp32 optimizer state, updated in place.
// Elementwise: deterministic for any thread count.
// Allocates: nothing.
#include <cmath>

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
};

Scalars scalars_of(const AdamWParams& p) {
  double t = static_cast<double>(p.step);
  double lr = p.lr, beta1 = p.beta1, beta2 = p.beta2;
  Scalars s{};
  s.decay = static_cast<float>(1.0 - lr * static_cast<double>(p.weight_decay));
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = p.beta2;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = p.eps;
  s.grad_scale = p.grad_scale;
  return s;
}

// The fp32 update of one element; returns the new parameter value.
inline float step(float p, float g, float& m, float& v, const Scalars& s) {
  g *= s.grad_scale;
  p *= s.decay;
  // PyTorch's lerp: the branch keeps the result exact at both ends.
  float w = s.one_minus_beta1;
  m = w < 0.5f ? m + w * (g - m) : g - (g - m) * (1.0f - w);
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  float denominator = std::sqrt(v) / s.bc2_sqrt + s.eps;
  return p - s.step_size * m / denominator;
}

}  // namespace

void CpuKernels::adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                              Tensor& v, const AdamWParams& params) {
  const Scalars s = scalars_of(params);
  int64_t n = param.numel();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  if (param.dtype() == DType::kF32) {
    float* p = param.data<float>();
    const float* g = grad.data<float>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i)
      p[i] = step(p[i], g[i], pm[i], pv[i], s);
  } else {
    const WeightUpdate w(param, master);
    const GradValues g(grad);
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i)
      w.store(i, step(w.load(i), g[i], pm[i], pv[i], s));
  }
}

}  // namespace headroom
