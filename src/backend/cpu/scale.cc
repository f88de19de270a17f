// scale: x *= alpha in place, fp32, bf16 or fp16 (16-bit: multiplied in fp32,
// rounded once to nearest even). IEEE throughout: alpha = 0 leaves NaN and
// inf as NaN (the gradient clip must not hide a non-finite gradient).
// Allocates: nothing.
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

void CpuKernels::scale(Tensor& x, float alpha) {
  int64_t n = x.numel();
  if (x.dtype() == DType::kF32) {
    float* p = x.data<float>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i)
      p[i] *= alpha;
  } else {
    with_floating_type(x.dtype(), [&]<typename T>(T*) {
      T* p = x.data<T>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
      for (int64_t i = 0; i < n; ++i)
        store(p + i, widen(p[i]) * alpha);
    });
  }
}

}  // namespace headroom
