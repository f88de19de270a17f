// fill_uniform: x[i] = random_uniform(seed, i, lo, hi) (backend/common/rng.h), i the
// flat index; bf16 and fp16 store that fp32 value rounded to nearest even.
// Deterministic in (seed, i) alone: any thread count, any backend, any split
// of the loop gives the same bits.
// Allocates: nothing.
#include "backend/common/rng.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"

namespace headroom {

void CpuKernels::fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) {
  int64_t n = x.numel();
  if (x.dtype() == DType::kF32) {
    float* p = x.data<float>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i)
      p[i] = random_uniform(seed, static_cast<uint64_t>(i), lo, hi);
  } else {
    with_floating_type(x.dtype(), [&]<typename T>(T*) {
      T* p = x.data<T>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
      for (int64_t i = 0; i < n; ++i)
        store(p + i, random_uniform(seed, static_cast<uint64_t>(i), lo, hi));
    });
  }
}

}  // namespace headroom
