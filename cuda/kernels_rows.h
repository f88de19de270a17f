// Entry points of the row kernels (sum_squares, embedding, rmsnorm, rope,
// cross_entropy): the cuda halves of cpu/<op>.cc, with its numerics. Every
// function launches on `stream` and returns the launch status; none
// synchronizes, none allocates. Pointers are device pointers; bf16 and fp16
// are raw uint16_t storage, widened to fp32 on load and rounded to nearest
// even once on store. Every reduction is summed in a fixed order (a tree per
// block, blocks in index order, no atomics), so a call gives the same bits
// every time and on every device.
//
// Values only the kernels read (token ids, targets) are not reported as the
// cpu's InternalError would (that needs a copy back and a synchronize per
// call); instead they poison what they touch with NaN, which the trainer's
// non-finite check sees, and never read or write out of bounds.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace headroom::cuda {

// out[0] = float(double(out[0]) + sum of x[i]^2 in double), n elements.
// Uses a fixed 8 KiB of module memory for the per-block partials: calls on
// one device must be ordered (one stream, as CudaContext has).
cudaError_t sum_squares_f32(const float* x, int64_t n, float* out, cudaStream_t stream);
cudaError_t sum_squares_bf16(const uint16_t* x, int64_t n, float* out, cudaStream_t stream);
cudaError_t sum_squares_f16(const uint16_t* x, int64_t n, float* out, cudaStream_t stream);

// out[t, :] = table[ids[t], :], table (vocab, width), out (tokens, width);
// a row whose id is outside [0, vocab) becomes NaN.
cudaError_t embedding_forward_f32(const float* table, int64_t vocab, int64_t width,
                                  const int32_t* ids, int64_t tokens, float* out,
                                  cudaStream_t stream);
cudaError_t embedding_forward_bf16(const uint16_t* table, int64_t vocab, int64_t width,
                                   const int32_t* ids, int64_t tokens, uint16_t* out,
                                   cudaStream_t stream);
cudaError_t embedding_forward_f16(const uint16_t* table, int64_t vocab, int64_t width,
                                  const int32_t* ids, int64_t tokens, uint16_t* out,
                                  cudaStream_t stream);
// d_table[v, :] += (fp32 sum, in token order, of d_out[t, :] over ids[t] ==
// v), rounded once; `order` (tokens int32) receives the token indices
// sorted by (id, index). Ids outside [0, vocab) add nothing.
cudaError_t embedding_backward_f32(const float* d_out, const int32_t* ids, int64_t tokens,
                                   int64_t width, float* d_table, int64_t vocab, int32_t* order,
                                   cudaStream_t stream);
cudaError_t embedding_backward_bf16(const uint16_t* d_out, const int32_t* ids, int64_t tokens,
                                    int64_t width, uint16_t* d_table, int64_t vocab, int32_t* order,
                                    cudaStream_t stream);
cudaError_t embedding_backward_f16(const uint16_t* d_out, const int32_t* ids, int64_t tokens,
                                   int64_t width, uint16_t* d_table, int64_t vocab, int32_t* order,
                                   cudaStream_t stream);

// y = x * rstd * w per row of x (rows, width), rstd = 1 / sqrt(mean(x^2) +
// eps) from a double row sum, written to rstd (rows, fp32).
cudaError_t rmsnorm_forward_f32(const float* x, const float* w, float eps, float* y, float* rstd,
                                int64_t rows, int64_t width, cudaStream_t stream);
cudaError_t rmsnorm_forward_bf16(const uint16_t* x, const uint16_t* w, float eps, uint16_t* y,
                                 float* rstd, int64_t rows, int64_t width, cudaStream_t stream);
cudaError_t rmsnorm_forward_f16(const uint16_t* x, const uint16_t* w, float eps, uint16_t* y,
                                float* rstd, int64_t rows, int64_t width, cudaStream_t stream);
// dx written, dw (width) accumulated unless null (a frozen weight).
cudaError_t rmsnorm_backward_f32(const float* dy, const float* x, const float* w, const float* rstd,
                                 float* dx, float* dw, int64_t rows, int64_t width,
                                 cudaStream_t stream);
cudaError_t rmsnorm_backward_bf16(const uint16_t* dy, const uint16_t* x, const uint16_t* w,
                                  const float* rstd, uint16_t* dx, uint16_t* dw, int64_t rows,
                                  int64_t width, cudaStream_t stream);
cudaError_t rmsnorm_backward_f16(const uint16_t* dy, const uint16_t* x, const uint16_t* w,
                                 const float* rstd, uint16_t* dx, uint16_t* dw, int64_t rows,
                                 int64_t width, cudaStream_t stream);

// Rotary embedding in place on x (tokens, width), heads of head_dim
// ("rotate_half"); sign +1 rotates (forward), -1 applies the transpose
// (backward). Angles as cpu/rope.cc computes them.
cudaError_t rope_f32(float* x, const int32_t* positions, int64_t tokens, int64_t width,
                     int64_t head_dim, float theta, float sign, cudaStream_t stream);
cudaError_t rope_bf16(uint16_t* x, const int32_t* positions, int64_t tokens, int64_t width,
                      int64_t head_dim, float theta, float sign, cudaStream_t stream);
cudaError_t rope_f16(uint16_t* x, const int32_t* positions, int64_t tokens, int64_t width,
                     int64_t head_dim, float theta, float sign, cudaStream_t stream);

// lse[i] = logsumexp of row i of logits (rows, vocab); loss_sum[0] +=
// sum over rows with target != -1 of lse[i] - logits[i, target[i]] (double,
// rounded once). A target outside [-1, vocab) makes loss_sum NaN. Uses a
// fixed 8 KiB of module memory for the partials: calls on one device must be
// ordered (one stream).
cudaError_t cross_entropy_forward_f32(const float* logits, const int32_t* targets, int64_t rows,
                                      int64_t vocab, float* lse, float* loss_sum,
                                      cudaStream_t stream);
cudaError_t cross_entropy_forward_bf16(const uint16_t* logits, const int32_t* targets, int64_t rows,
                                       int64_t vocab, float* lse, float* loss_sum,
                                       cudaStream_t stream);
cudaError_t cross_entropy_forward_f16(const uint16_t* logits, const int32_t* targets, int64_t rows,
                                      int64_t vocab, float* lse, float* loss_sum,
                                      cudaStream_t stream);
// In place: logits[i, :] = scale * (exp(logits[i, :] - lse[i]) - onehot);
// rows with target -1 become 0, rows with a target outside [-1, vocab) NaN.
cudaError_t cross_entropy_backward_f32(float* logits, const int32_t* targets, const float* lse,
                                       int64_t rows, int64_t vocab, float scale,
                                       cudaStream_t stream);
cudaError_t cross_entropy_backward_bf16(uint16_t* logits, const int32_t* targets, const float* lse,
                                        int64_t rows, int64_t vocab, float scale,
                                        cudaStream_t stream);
cudaError_t cross_entropy_backward_f16(uint16_t* logits, const int32_t* targets, const float* lse,
                                       int64_t rows, int64_t vocab, float scale,
                                       cudaStream_t stream);

}  // namespace headroom::cuda

#ifdef __CUDACC__
// ---- device helpers shared by the row kernels' .cu files (nvcc only) ----
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "storage.cuh"

namespace headroom::cuda::rows {

using ::headroom::cuda::store;  // storage.cuh
using ::headroom::cuda::widen;

// The sum of every thread's v, returned to every thread, in a fixed order
// (warp shuffle tree, then the warps' sums by warp 0's tree). blockDim.x is
// a multiple of 32, at most 1024; every thread of the block must call it;
// `shared` holds 32 values and may be reused right after it returns.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* shared) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : T(0);
    for (int offset = 16; offset > 0; offset >>= 1)
      v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const T total = shared[0];
  __syncthreads();
  return total;
}

// The largest v of the block (as block_sum), passing over NaN as the cpu's
// select_less does: m < v is false for a NaN v, so m stays.
__device__ __forceinline__ float max_of(float m, float v) {
  return m < v ? v : m;
}
__device__ __forceinline__ float block_max(float v, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = max_of(v, __shfl_down_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : -INFINITY;
    for (int offset = 16; offset > 0; offset >>= 1)
      v = max_of(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const float total = shared[0];
  __syncthreads();
  return total;
}

// Blocks for `work` items of one per block (or `per_block` per block),
// at least 1, at most 65535; the kernels stride over the rest.
inline int grid_for(int64_t work, int64_t per_block = 1) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace headroom::cuda::rows
#endif  // __CUDACC__
