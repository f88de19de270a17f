// rmsnorm on cuda, the kernels of cuda/rmsnorm.cu on the backend's stream,
// fp32, bf16 or fp16 (x, w, y, dy, dx, dw one dtype; rstd fp32):
// rmsnorm_forward: y = x * rstd * w per row, rstd = 1 / sqrt(mean(x^2) +
// eps) written for backward.
// rmsnorm_backward: dx written, dw accumulated (+=), dw undefined for a
// frozen weight (then only dx, by the same kernel, so the same bits).
// Numerics as cpu/rmsnorm.cc: row and column sums in double, elementwise
// fp32 without FMA contraction, one rounding per stored element. dw's
// column sums run over a fixed partition of the rows, added in range order:
// deterministic, and off cpu's single pass by double rounding only.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_rows.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                                  Tensor& rstd) {
  const int64_t rows = x.size(0), width = x.size(1);
  if (rows == 0) return;
  float* r = rstd.data<float>();
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::rmsnorm_forward_f32(x.data<float>(), w.data<float>(), eps,
                                              y.data<float>(), r, rows, width, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::rmsnorm_forward_bf16(bits16(x), bits16(w), eps, bits16(y), r, rows, width,
                                               stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::rmsnorm_forward_f16(bits16(x), bits16(w), eps, bits16(y), r, rows, width,
                                              stream()));
      return;
    default:
      refuse_cuda_dtype("rmsnorm_forward", x.dtype());
  }
}

void CudaKernels::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                   const Tensor& rstd, Tensor& dx, Tensor& dw) {
  const int64_t rows = x.size(0), width = x.size(1);
  if (rows == 0 || width == 0) return;
  const float* r = rstd.data<float>();
  const bool has_dw = dw.defined();  // undefined: a frozen weight
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::rmsnorm_backward_f32(
          dy.data<float>(), x.data<float>(), w.data<float>(), r, dx.data<float>(),
          has_dw ? dw.data<float>() : nullptr, rows, width, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::rmsnorm_backward_bf16(bits16(dy), bits16(x), bits16(w), r, bits16(dx),
                                                has_dw ? bits16(dw) : nullptr, rows, width,
                                                stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::rmsnorm_backward_f16(bits16(dy), bits16(x), bits16(w), r, bits16(dx),
                                               has_dw ? bits16(dw) : nullptr, rows, width,
                                               stream()));
      return;
    default:
      refuse_cuda_dtype("rmsnorm_backward", x.dtype());
  }
}

}  // namespace headroom
