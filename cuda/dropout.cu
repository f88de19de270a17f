// dropout: out[i] = keep(seed, i) ? x[i] * s : +0, s = dropout_scale(p) =
// 1 / (1 - p) in fp32, keep = dropout_keeps (backend/common/dropout_mask.h), i
// the flat index: one thread per index draws the cpu's mask exactly, and the
// one multiply (rounded once into bf16 / fp16) gives the cpu's bits. A dropped
// element is selected as +0, not x * 0, so an inf or NaN there does not
// survive. out may be x exactly (element i is read before it is written, by
// the same thread). Its own backward: dropout of dy with the same (seed, p).
#include "backend/common/dropout_mask.h"
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

template <typename E>
__global__ void dropout_kernel(const typename E::Storage* x, float p, float scale, uint64_t seed,
                               typename E::Storage* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = E::store(dropout_keeps(seed, i, p) ? E::load(x[i]) * scale : 0.0f);
}

template <typename E>
cudaError_t launch_dropout(const typename E::Storage* x, float p, uint64_t seed,
                           typename E::Storage* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  // The host's IEEE division, the value the cpu multiplies by.
  const float scale = dropout_scale(p);
  dropout_kernel<E>
      <<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, p, scale, seed, out, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t dropout_f32(const float* x, float p, uint64_t seed, float* out, int64_t n,
                        cudaStream_t stream) {
  return launch_dropout<ElementF32>(x, p, seed, out, n, stream);
}

cudaError_t dropout_bf16(const uint16_t* x, float p, uint64_t seed, uint16_t* out, int64_t n,
                         cudaStream_t stream) {
  return launch_dropout<ElementBF16>(x, p, seed, out, n, stream);
}

cudaError_t dropout_f16(const uint16_t* x, float p, uint64_t seed, uint16_t* out, int64_t n,
                        cudaStream_t stream) {
  return launch_dropout<ElementF16>(x, p, seed, out, n, stream);
}

}  // namespace headroom::cuda
