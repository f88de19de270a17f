// The weight an optimizer update is computed on and where its result goes,
// for the master settings of 16-bit parameters (train/optimizer.h), resolved
// at compile time so the update loops vectorize (adamw.cc, adamw8bit.cc):
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
#include <type_traits>

#include "backend/cpu/convert.h"
#include "backend/cpu/floating_type.h"
#include "tensor/tensor.h"

namespace headroom {

// P is the parameter's dtype (the gradient's too); M the master's: float,
// P, or void for none.
template <typename P, typename M>
struct WeightUpdate {
  P* param;
  M* master;

  __attribute__((always_inline)) float load(int64_t i) const {
    if constexpr (std::is_void_v<M>)
      return widen(param[i]);
    else
      return widen(master[i]);
  }
  __attribute__((always_inline)) void store(int64_t i, float w) const {
    if constexpr (std::is_same_v<M, float>) master[i] = w;
    if constexpr (std::is_same_v<M, P>) {
      // One rounding written twice. Reading param[i] back after storing it
      // (param and master might alias, for all GCC knows) kept the loop
      // scalar, sqrt and divisions included.
      P rounded;
      headroom::store(&rounded, w);
      param[i] = rounded;
      master[i] = rounded;
    } else {
      headroom::store(param + i, w);
    }
  }
};

// Calls body(update, grad) with the WeightUpdate<P, M> of param's dtype and
// master's (undefined: none; the checks let through fp32, or for 16-bit
// params one of param's own dtype) and grad as const P*.
template <typename Body>
void with_weight_update(Tensor& param, Tensor& master, const Tensor& grad, Body&& body) {
  with_floating_type(param.dtype(), [&]<typename P>(P*) {
    P* p = param.data<P>();
    const P* g = grad.data<P>();
    if (!master.defined()) {
      body(WeightUpdate<P, void>{p, nullptr}, g);
    } else if constexpr (!std::is_same_v<P, float>) {
      if (master.dtype() == DType::kF32)
        body(WeightUpdate<P, float>{p, master.data<float>()}, g);
      else
        body(WeightUpdate<P, P>{p, master.data<P>()}, g);
    }
  });
}

}  // namespace headroom
