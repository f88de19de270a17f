// WeightUpdate<D, K>: the parameter side of an optimizer step on cuda,
// cpu/weight_update.h's WeightUpdate with its case (master fp32, master in
// param's dtype, no master) a template argument: where the fp32 weight is
// read from, and every copy it is written back to, rounded once. Shared by
// adamw.cu and adamw8bit.cu. nvcc only.
#pragma once

#include <cstdint>

#include "kernels_optimizer.h"
#include "storage.cuh"

namespace headroom::cuda {

// cpu/weight_update.h's WeightUpdate, its case a template argument.
template <typename D, MasterKind K>
struct WeightUpdate {
  using T = typename Storage<D>::T;
  T* param;
  void* master;

  __device__ float load(int64_t i) const {
    if constexpr (K == MasterKind::kF32)
      return static_cast<const float*>(master)[i];
    else if constexpr (K == MasterKind::kParamDtype)
      return Storage<D>::widen(static_cast<const T*>(master)[i]);
    else
      return Storage<D>::widen(param[i]);
  }
  __device__ void store(int64_t i, float w) const {
    if constexpr (K == MasterKind::kF32) static_cast<float*>(master)[i] = w;
    const T rounded = Storage<D>::round(w);
    param[i] = rounded;
    if constexpr (K == MasterKind::kParamDtype) static_cast<T*>(master)[i] = rounded;
  }
};

}  // namespace headroom::cuda
