// fill_uniform on cuda: x[i] = random_uniform(seed, i, lo, hi)
// (backend/common/rng.h), i the flat index, by cuda/fill_uniform.cu, one
// thread per index; bf16 and fp16 store that fp32 value rounded to nearest
// even. Deterministic in (seed, i) alone, and the cpu's bits (cpu/
// fill_uniform.cc): rng.h's device path rounds the multiply and the add
// separately, as the cpu does.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_elementwise.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) {
  const int64_t n = x.numel();
  if (n == 0) return;
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::fill_uniform_f32(x.data<float>(), n, seed, lo, hi, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::fill_uniform_bf16(bits16(x), n, seed, lo, hi, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::fill_uniform_f16(bits16(x), n, seed, lo, hi, stream()));
      return;
    default:
      refuse_cuda_dtype("fill_uniform", x.dtype());
  }
}

}  // namespace headroom
