// The weight an optimizer update is computed on and where its result goes,
// for the master settings of 16-bit parameters (train/optimizer.h), chosen
// per element at run time (adamw8bit.cc; adamw.cc resolves the same cases
// at compile time so its loop vectorizes):
//   fp32 param, no master        w = p;          p = w
//   bf16 param, fp32 master      w = master;     master = w, p = bf16(w)
//   bf16 param, bf16 master      w = master;     master = p = bf16(w)
//   bf16 param, no master        w = p;          p = bf16(w)   (in place)
//   fp16 param, fp32 master      w = master;     master = w, p = fp16(w)
//   fp16 param, no master        w = p;          p = fp16(w)   (in place)
// bf16(w) and fp16(w) round to nearest even once per step (no stochastic
// rounding).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace headroom {

struct WeightUpdate {
  float* param32 = nullptr;
  bf16* param16 = nullptr;
  f16* param_f16 = nullptr;
  float* master32 = nullptr;
  bf16* master16 = nullptr;

  WeightUpdate(Tensor& param, Tensor& master) {
    if (param.dtype() == DType::kF32)
      param32 = param.data<float>();
    else if (param.dtype() == DType::kF16)
      param_f16 = param.data<f16>();
    else
      param16 = param.data<bf16>();
    if (master.defined() && master.dtype() == DType::kF32) master32 = master.data<float>();
    if (master.defined() && master.dtype() == DType::kBF16) master16 = master.data<bf16>();
  }

  float load(int64_t i) const {
    if (master32) return master32[i];
    if (master16) return to_float(master16[i]);
    if (param32) return param32[i];
    if (param_f16) return to_float(param_f16[i]);
    return to_float(param16[i]);
  }

  void store(int64_t i, float w) const {
    if (param32) {
      param32[i] = w;
      return;
    }
    if (master32) master32[i] = w;
    if (param_f16) {
      param_f16[i] = to_f16(w);
      return;
    }
    param16[i] = to_bf16(w);
    if (master16) master16[i] = param16[i];
  }
};

// The gradient's elements as fp32.
struct GradValues {
  const float* g32 = nullptr;
  const bf16* g16 = nullptr;
  const f16* g_f16 = nullptr;

  explicit GradValues(const Tensor& grad) {
    if (grad.dtype() == DType::kF32)
      g32 = grad.data<float>();
    else if (grad.dtype() == DType::kF16)
      g_f16 = grad.data<f16>();
    else
      g16 = grad.data<bf16>();
  }
  float operator[](int64_t i) const {
    return g32 ? g32[i] : g_f16 ? to_float(g_f16[i]) : to_float(g16[i]);
  }
};

}  // namespace headroom
