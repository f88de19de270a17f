// add: out = a + b elementwise; same shape and dtype (fp32, bf16 or fp16).
// 16-bit dtypes add in fp32 and rounds once to nearest even. out may be a or b itself
// (the residual stream updates in place); partial overlap is rejected.
// Allocates: nothing.
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"

namespace headroom {

void CpuKernels::add(const Tensor& a, const Tensor& b, Tensor& out) {
  int64_t n = a.numel();
  // Element i is read before it is written, by the same iteration, so
  // aliasing out with a or b is safe under any schedule.
  if (a.dtype() == DType::kF32) {
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* po = out.data<float>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i)
      po[i] = pa[i] + pb[i];
  } else {
    with_floating_type(a.dtype(), [&]<typename T>(T*) {
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
      for (int64_t i = 0; i < n; ++i)
        store(po + i, widen(pa[i]) + widen(pb[i]));
    });
  }
}

}  // namespace headroom
