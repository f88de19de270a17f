// sum_squares: out[0] = float(double(out[0]) + sum of x^2), the global
// gradient norm's building block (cpu/sum_squares.cc). Squares and sums are
// in double, as on cpu, so the norm of an 8B-parameter model does not drift
// with its size; a NaN or inf in x makes out non-finite.
//
// Deterministic, in two passes: x is cut into kPartitions fixed ranges
// (boundaries depend only on n), block p sums range p (each thread in index
// order, then the block's fixed tree) into partials[p]; then one block sums
// the partials in a fixed tree and adds the total into out once. The
// partials live in module memory (kPartitions doubles, 8 KiB) because the op
// receives no scratch and out is one element: calls on one device must not
// overlap, which the backend's one stream guarantees.
#include "kernels_rows.h"

namespace headroom::cuda {

namespace {

using rows::block_sum;
using rows::widen;

constexpr int kPartitions = 1024;
constexpr int kThreads = 256;

__device__ double g_partials[kPartitions];

template <typename T>
__global__ void __launch_bounds__(kThreads) partial_sums_kernel(const T* x, int64_t n) {
  __shared__ double shared[32];
  const int64_t p = blockIdx.x;
  const int64_t begin = n * p / kPartitions, end = n * (p + 1) / kPartitions;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double v = widen(x[i]);
    sum += v * v;  // exact: a float's square fits in a double
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) g_partials[p] = sum;
}

__global__ void __launch_bounds__(kThreads) total_kernel(float* out) {
  __shared__ double shared[32];
  double sum = 0;
  for (int p = threadIdx.x; p < kPartitions; p += kThreads)
    sum += g_partials[p];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) out[0] = static_cast<float>(static_cast<double>(out[0]) + sum);
}

template <typename T>
cudaError_t sum_squares(const T* x, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;  // out += 0 leaves out as it is
  partial_sums_kernel<<<kPartitions, kThreads, 0, stream>>>(x, n);
  total_kernel<<<1, kThreads, 0, stream>>>(out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t sum_squares_f32(const float* x, int64_t n, float* out, cudaStream_t stream) {
  return sum_squares(x, n, out, stream);
}

cudaError_t sum_squares_bf16(const uint16_t* x, int64_t n, float* out, cudaStream_t stream) {
  return sum_squares(reinterpret_cast<const __nv_bfloat16*>(x), n, out, stream);
}

cudaError_t sum_squares_f16(const uint16_t* x, int64_t n, float* out, cudaStream_t stream) {
  return sum_squares(reinterpret_cast<const __half*>(x), n, out, stream);
}

}  // namespace headroom::cuda
