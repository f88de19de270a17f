// scale: x *= alpha in place, fp32, bf16 or fp16 (16-bit: multiplied in fp32,
// rounded once to nearest even, as cpu/scale.cc). IEEE throughout: alpha = 0
// leaves NaN and inf as NaN (the gradient clip must not hide a non-finite
// gradient).
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

template <typename E>
__global__ void scale_kernel(typename E::Storage* x, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = E::store(E::load(x[i]) * alpha);
}

template <typename E>
cudaError_t launch_scale(typename E::Storage* x, int64_t n, float alpha, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  scale_kernel<E><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, n, alpha);
  return cudaGetLastError();
}

}  // namespace

cudaError_t scale_f32(float* x, int64_t n, float alpha, cudaStream_t stream) {
  return launch_scale<ElementF32>(x, n, alpha, stream);
}

cudaError_t scale_bf16(uint16_t* x, int64_t n, float alpha, cudaStream_t stream) {
  return launch_scale<ElementBF16>(x, n, alpha, stream);
}

cudaError_t scale_f16(uint16_t* x, int64_t n, float alpha, cudaStream_t stream) {
  return launch_scale<ElementF16>(x, n, alpha, stream);
}

}  // namespace headroom::cuda
