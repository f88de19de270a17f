// scale on cuda: x *= alpha in place by cuda/scale.cu, fp32, bf16 or fp16
// (16-bit: multiplied in fp32, rounded once to nearest even), the cpu's bits
// (cpu/scale.cc). IEEE throughout: alpha = 0 leaves NaN and inf as NaN.
// Elementwise, so deterministic.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_elementwise.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::scale(Tensor& x, float alpha) {
  const int64_t n = x.numel();
  if (n == 0) return;
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::scale_f32(x.data<float>(), n, alpha, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::scale_bf16(bits16(x), n, alpha, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::scale_f16(bits16(x), n, alpha, stream()));
      return;
    default:
      refuse_cuda_dtype("scale", x.dtype());
  }
}

}  // namespace headroom
