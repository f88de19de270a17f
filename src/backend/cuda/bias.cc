// bias_forward on cuda: x[t, :] += bias[:] in place; x (T, N), bias (N), one
// dtype (16-bit: added in fp32, rounded once).
// bias_backward on cuda: d_bias[:] += sum over t of dy[t, :], accumulated; one
// thread per column walks the rows in order with a double sum and rounds into
// d_bias once, exactly as cpu/bias.cc: the cpu's bits, every run (no atomics,
// no split of the rows). Both by cuda/bias.cu.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_elementwise.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::bias_forward(Tensor& x, const Tensor& bias) {
  const int64_t rows = x.size(0);
  const int64_t width = x.size(1);
  if (rows == 0 || width == 0) return;
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(
          cuda::bias_forward_f32(x.data<float>(), bias.data<float>(), rows, width, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::bias_forward_bf16(bits16(x), bits16(bias), rows, width, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::bias_forward_f16(bits16(x), bits16(bias), rows, width, stream()));
      return;
    default:
      refuse_cuda_dtype("bias_forward", x.dtype());
  }
}

void CudaKernels::bias_backward(const Tensor& dy, Tensor& d_bias) {
  const int64_t rows = dy.size(0);
  const int64_t width = dy.size(1);
  // No rows still rewrites d_bias as d_bias + 0.0, as the cpu does.
  if (width == 0) return;
  switch (dy.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(
          cuda::bias_backward_f32(dy.data<float>(), d_bias.data<float>(), rows, width, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::bias_backward_bf16(bits16(dy), bits16(d_bias), rows, width, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::bias_backward_f16(bits16(dy), bits16(d_bias), rows, width, stream()));
      return;
    default:
      refuse_cuda_dtype("bias_backward", dy.dtype());
  }
}

}  // namespace headroom
