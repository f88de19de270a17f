// add: out = a + b elementwise; same shape and dtype (fp32, bf16 or fp16).
// 16-bit dtypes add in fp32 and rounds once to nearest even. out may be a or b itself
// (the residual stream updates in place); partial overlap is rejected.
// Allocates: nothing.
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"

namespace headroom {

namespace {

template <typename T>
HR_CPU_CLONES void add_range(const T* a, const T* b, T* out, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    store(out + i, widen(a[i]) + widen(b[i]));
}

}  // namespace

void CpuKernels::add(const Tensor& a, const Tensor& b, Tensor& out) {
  int64_t n = a.numel();
  // Element i is read before it is written, by the same iteration, so
  // aliasing out with a or b is safe under any split of the range.
  with_floating_type(a.dtype(), [&]<typename T>(T*) {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    for_each_thread_range(n, n >= kMinParallelElements,
                          [&](int64_t begin, int64_t end) { add_range(pa, pb, po, begin, end); });
  });
}

}  // namespace headroom
