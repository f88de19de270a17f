// rope on cuda, the kernel of cuda/rope.cu on the backend's stream, fp32,
// bf16 or fp16, in place: rope_forward rotates x (T, n * head_dim) by the
// angles of positions (T) ("rotate_half", Hugging Face Llama), rope_backward
// applies the transpose (sin negated) to a gradient. Angles as
// cpu/rope.cc's: fp32 inv_freq and angle, cos / sin evaluated in double and
// rounded to fp32 once, recomputed per (token, frequency) on the device
// instead of cpu's host table. Elementwise, so deterministic.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_rows.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

// sign +1: the rotation; -1: its transpose.
void rotate(const char* op, Tensor& x, const Tensor& positions, int64_t head_dim, float theta,
            float sign, cudaStream_t stream) {
  const int64_t tokens = x.size(0), width = x.size(1);
  if (tokens == 0 || width == 0) return;
  const int32_t* p = positions.data<int32_t>();
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(
          cuda::rope_f32(x.data<float>(), p, tokens, width, head_dim, theta, sign, stream));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::rope_bf16(bits16(x), p, tokens, width, head_dim, theta, sign, stream));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::rope_f16(bits16(x), p, tokens, width, head_dim, theta, sign, stream));
      return;
    default:
      refuse_cuda_dtype(op, std::string(name_of(x.dtype())));
  }
}

}  // namespace

void CudaKernels::rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) {
  rotate("rope_forward", x, positions, head_dim, theta, 1.0f, stream());
}

void CudaKernels::rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim,
                                float theta) {
  rotate("rope_backward", dx, positions, head_dim, theta, -1.0f, stream());
}

}  // namespace headroom
