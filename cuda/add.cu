// add: out = a + b elementwise, fp32, bf16 or fp16 (16-bit: added in fp32 and
// rounded once to nearest even, as cpu/add.cc). Aliasing out with a or b is
// fine since each element is read before it is written by the same thread.
#include "kernels.h"
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

template <typename E>
__global__ void add_kernel(const typename E::Storage* a, const typename E::Storage* b,
                           typename E::Storage* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = E::store(E::load(a[i]) + E::load(b[i]));
}

template <typename E>
cudaError_t launch_add(const typename E::Storage* a, const typename E::Storage* b,
                       typename E::Storage* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  add_kernel<E><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t add_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  return launch_add<ElementF32>(a, b, out, n, stream);
}

cudaError_t add_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                     cudaStream_t stream) {
  return launch_add<ElementBF16>(a, b, out, n, stream);
}

cudaError_t add_f16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                    cudaStream_t stream) {
  return launch_add<ElementF16>(a, b, out, n, stream);
}

}  // namespace headroom::cuda
