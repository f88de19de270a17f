// fill_uniform: x[i] = random_uniform(seed, i, lo, hi) (backend/common/rng.h),
// i the flat index, one thread per index; bf16 and fp16 store that fp32 value
// rounded to nearest even. rng.h's device path keeps the multiply and the add
// apart (_rn intrinsics, no fma), so these are the cpu fill_uniform's bits.
#include "backend/common/rng.h"
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

template <typename E>
__global__ void fill_uniform_kernel(typename E::Storage* x, int64_t n, uint64_t seed, float lo,
                                    float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = E::store(random_uniform(seed, static_cast<uint64_t>(i), lo, hi));
}

template <typename E>
cudaError_t launch_fill_uniform(typename E::Storage* x, int64_t n, uint64_t seed, float lo,
                                float hi, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_uniform_kernel<E>
      <<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, n, seed, lo, hi);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_uniform_f32(float* x, int64_t n, uint64_t seed, float lo, float hi,
                             cudaStream_t stream) {
  return launch_fill_uniform<ElementF32>(x, n, seed, lo, hi, stream);
}

cudaError_t fill_uniform_bf16(uint16_t* x, int64_t n, uint64_t seed, float lo, float hi,
                              cudaStream_t stream) {
  return launch_fill_uniform<ElementBF16>(x, n, seed, lo, hi, stream);
}

cudaError_t fill_uniform_f16(uint16_t* x, int64_t n, uint64_t seed, float lo, float hi,
                             cudaStream_t stream) {
  return launch_fill_uniform<ElementF16>(x, n, seed, lo, hi, stream);
}

}  // namespace headroom::cuda
