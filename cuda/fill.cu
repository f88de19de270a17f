// fill: x[i] = value. Grid-stride loop so one launch covers any n.
#include <cuda_bf16.h>

#include "kernels.h"

namespace headroom::cuda {

namespace {

template <typename T, typename Convert>
__global__ void fill_kernel(T* x, int64_t n, float value, Convert convert) {
  T v = convert(value);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = v;
}

int blocks_for(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

cudaError_t fill_f32(float* x, int64_t n, float value, cudaStream_t stream) {
  fill_kernel<<<blocks_for(n), 256, 0, stream>>>(x, n, value, [] __device__(float v) { return v; });
  return cudaGetLastError();
}

cudaError_t fill_bf16(uint16_t* x, int64_t n, float value, cudaStream_t stream) {
  fill_kernel<<<blocks_for(n), 256, 0, stream>>>(
      x, n, value, [] __device__(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); });
  return cudaGetLastError();
}

}  // namespace headroom::cuda
