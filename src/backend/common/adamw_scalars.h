// The per-call scalars of AdamW and 8-bit AdamW, derived on the host from
// AdamWParams (backend.h) once for every backend, so the cpu and the cuda
// kernels step with the same bits: double math, rounded to fp32 once.
//
// Each backend keeps its own scalars struct (the cuda one is a kernel
// parameter, the cpu one carries its lerp mask and map pointers); these fill
// the fields they share by name and the caller sets its extras after.
#pragma once

#include <cmath>

#include "backend/common/dynamic_map.h"

namespace headroom {

// s.decay = 1 - lr wd, s.step_size = lr / (1 - beta1^t), s.bc2_sqrt =
// sqrt(1 - beta2^t), and 1 - beta1, beta2, 1 - beta2, eps, grad_scale, in
// PyTorch's operation order (cpu/adamw.cc).
template <typename Params, typename Scalars>
void set_adamw_scalars(const Params& p, Scalars& s) {
  const double t = static_cast<double>(p.step);
  const double lr = p.lr, beta1 = p.beta1, beta2 = p.beta2;
  s.decay = static_cast<float>(1.0 - lr * static_cast<double>(p.weight_decay));
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = p.beta2;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = p.eps;
  s.grad_scale = p.grad_scale;
}

// bitsandbytes' 8-bit AdamW (cpu/adamw8bit.cc): c1 = 1 - beta1^t, c2 =
// sqrt(1 - beta2^t), s.step_size = -lr c2 / c1, s.c2_eps = c2 eps, s.decay =
// 1 - lr wd (1 without weight decay), beta1, beta2, 1 - beta1 and 1 - beta2
// in fp32, grad_scale, and zero_s, zero_u: the codes of 0 in the signed and
// unsigned dynamic maps.
template <typename Params, typename Scalars>
void set_adamw8bit_scalars(const Params& p, Scalars& s) {
  const double t = static_cast<double>(p.step);
  const double c1 = 1.0 - std::pow(static_cast<double>(p.beta1), t);
  const double c2 = std::sqrt(1.0 - std::pow(static_cast<double>(p.beta2), t));
  s.step_size = static_cast<float>(-static_cast<double>(p.lr) * c2 / c1);
  s.c2_eps = static_cast<float>(c2 * static_cast<double>(p.eps));
  s.decay = p.weight_decay > 0.0f
                ? static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weight_decay)
                : 1.0f;
  s.beta1 = p.beta1;
  s.beta2 = p.beta2;
  s.one_minus_beta1 = 1.0f - p.beta1;
  s.one_minus_beta2 = 1.0f - p.beta2;
  s.grad_scale = p.grad_scale;
  s.zero_s = quantize_to_map(dynamic_map(true), true, 0.0f);
  s.zero_u = quantize_to_map(dynamic_map(false), false, 0.0f);
}

}  // namespace headroom
