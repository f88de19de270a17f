// add: out = a + b, fp32, elementwise; aliasing out with a or b is fine since
// each element is read before it is written by the same thread.
#include "kernels.h"

namespace headroom::cuda {

namespace {
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
}  // namespace

cudaError_t add_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  int64_t blocks = (n + 255) / 256;
  int grid = static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
  add_kernel<<<grid, 256, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}

}  // namespace headroom::cuda
