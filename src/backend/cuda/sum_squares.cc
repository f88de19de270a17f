// sum_squares on cuda: out[0] += sum(x^2) over all of x (fp32, bf16 or
// fp16), out fp32 [1], the kernels of cuda/sum_squares.cu on the backend's
// stream. Squares and sums in double, rounded into out once, as on cpu;
// deterministic (fixed partition of x, partials summed in a fixed tree), so
// the same bits every run. The partials live in 8 KiB of module memory (the
// op has no scratch): correct because this backend issues every kernel of a
// device on its one stream. Nothing synchronizes: the caller reads out with
// copy_to_host.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_rows.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::sum_squares(const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  float* o = out.data<float>();
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::sum_squares_f32(x.data<float>(), n, o, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::sum_squares_bf16(bits16(x), n, o, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::sum_squares_f16(bits16(x), n, o, stream()));
      return;
    default:
      refuse_cuda_dtype("sum_squares", x.dtype());
  }
}

}  // namespace headroom
