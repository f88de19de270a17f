#include "backend/cpu/convert.h"

#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"

namespace headroom {

namespace {

// One thread's part of a bulk conversion, cloned for AVX2 (cpu_clones.h):
// bf16's widening and rounding are integer shifts and adds, 8 lanes at a
// time there, one element at a time in the baseline. On a CPU without
// native bf16 matmul every bf16 gemm widens its operands and rounds its
// result through these (cpu/gemm.cc), so they are on every step's path.
template <typename From, typename To>
HR_CPU_CLONES void convert_range(const From* src, To* dst, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    store(dst + i, widen(src[i]));
}

template <typename From, typename To>
void convert(const From* src, To* dst, int64_t n) {
  for_each_thread_range(n, n >= kMinParallelElements,
                        [&](int64_t b, int64_t e) { convert_range(src, dst, b, e); });
}

}  // namespace

void widen_bf16(const bf16* src, float* dst, int64_t n) {
  convert(src, dst, n);
}

void round_to_bf16(const float* src, bf16* dst, int64_t n) {
  convert(src, dst, n);
}

void widen_f16(const f16* src, float* dst, int64_t n) {
  convert(src, dst, n);
}

void round_to_f16(const float* src, f16* dst, int64_t n) {
  convert(src, dst, n);
}

}  // namespace headroom
