// cross_entropy on cuda, the kernels of cuda/cross_entropy.cu on the
// backend's stream, logits fp32, bf16 or fp16:
// cross_entropy_forward: lse[i] = logsumexp of row i (every row); loss_sum +=
//   sum over rows with target != -1 of lse[i] - logits[i, target[i]].
// cross_entropy_backward, in place: logits <- scale * (softmax - onehot)
//   from forward's lse; rows with target -1 become exactly 0.
// Numerics as cpu/cross_entropy.cc: fp32 math with cpu's exp_approx, row
// sums and the loss in double, one rounding per stored element.
// Deterministic: one block per row, fixed trees, loss_sum summed over a
// fixed partition of the rows in order. The loss partials live in 8 KiB of
// module memory (the op has no scratch): correct because this backend issues
// every kernel of a device on its one stream.
// Targets outside [-1, V) are not reported here as cpu reports them (that
// would need a copy back and a synchronize per chunk): forward makes
// loss_sum NaN and backward the row's gradient NaN, so the step's non-finite
// check sees them.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_rows.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                        Tensor& loss_sum) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  if (rows == 0) return;
  const int32_t* target = targets.data<int32_t>();
  float* l = lse.data<float>();
  float* sum = loss_sum.data<float>();
  switch (logits.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::cross_entropy_forward_f32(logits.data<float>(), target, rows, vocab, l,
                                                    sum, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(
          cuda::cross_entropy_forward_bf16(bits16(logits), target, rows, vocab, l, sum, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(
          cuda::cross_entropy_forward_f16(bits16(logits), target, rows, vocab, l, sum, stream()));
      return;
    default:
      refuse_cuda_dtype("cross_entropy_forward", logits.dtype());
  }
}

void CudaKernels::cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                                         float scale) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  if (rows == 0 || vocab == 0) return;
  const int32_t* target = targets.data<int32_t>();
  const float* l = lse.data<float>();
  switch (logits.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::cross_entropy_backward_f32(logits.data<float>(), target, l, rows, vocab,
                                                     scale, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::cross_entropy_backward_bf16(bits16(logits), target, l, rows, vocab, scale,
                                                      stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::cross_entropy_backward_f16(bits16(logits), target, l, rows, vocab, scale,
                                                     stream()));
      return;
    default:
      refuse_cuda_dtype("cross_entropy_backward", logits.dtype());
  }
}

}  // namespace headroom
