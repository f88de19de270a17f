// fill: x[i] = value, for every dtype of the cpu fill (cpu/fill.cc): floating
// dtypes store the value rounded to nearest even, integer ones the value the
// host truncated toward zero (check_fill rejected any that does not fit).
// Grid-stride loop so one launch covers any n.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels.h"
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

// The value is converted once, on the host, to the stored bits.
template <typename T>
__global__ void fill_kernel(T* x, int64_t n, T value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = value;
}

template <typename T>
cudaError_t launch_fill(T* x, int64_t n, T value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, n, value);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_f32(float* x, int64_t n, float value, cudaStream_t stream) {
  return launch_fill(x, n, value, stream);
}

cudaError_t fill_bf16(uint16_t* x, int64_t n, float value, cudaStream_t stream) {
  return launch_fill(x, n, __bfloat16_as_ushort(__float2bfloat16_rn(value)), stream);
}

cudaError_t fill_f16(uint16_t* x, int64_t n, float value, cudaStream_t stream) {
  return launch_fill(x, n, __half_as_ushort(__float2half_rn(value)), stream);
}

cudaError_t fill_i32(int32_t* x, int64_t n, int32_t value, cudaStream_t stream) {
  return launch_fill(x, n, value, stream);
}

cudaError_t fill_i64(int64_t* x, int64_t n, int64_t value, cudaStream_t stream) {
  return launch_fill(x, n, value, stream);
}

cudaError_t fill_u8(uint8_t* x, int64_t n, uint8_t value, cudaStream_t stream) {
  return launch_fill(x, n, value, stream);
}

}  // namespace headroom::cuda
