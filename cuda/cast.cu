// cast between fp32 and bf16, round-to-nearest-even (the same rounding as
// tensor/dtype.h's to_bf16, so cpu and cuda casts agree bit for bit).
#include <cuda_bf16.h>

#include "kernels.h"

namespace headroom::cuda {

namespace {

__global__ void to_bf16_kernel(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

__global__ void to_f32_kernel(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
}

int grid_for(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

cudaError_t cast_f32_to_bf16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream) {
  to_bf16_kernel<<<grid_for(n), 256, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

cudaError_t cast_bf16_to_f32(const uint16_t* x, float* out, int64_t n, cudaStream_t stream) {
  to_f32_kernel<<<grid_for(n), 256, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

}  // namespace headroom::cuda
