#include "backend/cpu/convert.h"

#include "backend/cpu/cpu_kernels.h"

namespace headroom {

void widen_bf16(const bf16* src, float* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = to_float(src[i]);
}

void round_to_bf16(const float* src, bf16* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = to_bf16(src[i]);
}

void widen_f16(const f16* src, float* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = to_float(src[i]);
}

void round_to_f16(const float* src, f16* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = to_f16(src[i]);
}

}  // namespace headroom
