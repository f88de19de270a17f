// dropout on cuda: out[i] = keep(seed, i) ? x[i] * s : +0, s = 1 / (1 - p) in
// fp32, keep = dropout_keeps (backend/common/dropout_mask.h), by
// cuda/dropout.cu: the same kept elements and the same bits as cpu/dropout.cc
// (fp32, bf16 or fp16: fp32 math, one rounding per element). out may be x
// exactly. Counter-based, so deterministic and its own backward.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_elementwise.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::dropout_f32(x.data<float>(), p, seed, out.data<float>(), n, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::dropout_bf16(bits16(x), p, seed, bits16(out), n, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::dropout_f16(bits16(x), p, seed, bits16(out), n, stream()));
      return;
    default:
      refuse_cuda_dtype("dropout", x.dtype());
  }
}

}  // namespace headroom
