// cross_entropy (cpu/cross_entropy.cc's numerics), one chunk of logits (N, V):
// forward: lse[i] = log(sum_j exp(logits[i, j])) for every row; loss_sum +=
//   sum over rows with a target in [0, V) of lse[i] - logits[i, target[i]]
//   (-1: not counted, -2: counted on the rank holding its target). The
//   row max is subtracted before exp; the exp-sum, the log and each row's
//   loss are in double.
// backward, in place: logits[i, :] <- scale * (exp(logits[i, :] - lse[i]) -
//   onehot(target[i])) from forward's lse; rows with target -1 become 0,
//   rows with target -2 scale * exp(logits[i, :] - lse[i]).
// exp is cpu/exp_approx.h's, operation for operation (each step rounded as
// written: the _rn intrinsics keep nvcc from contracting into FMAs), with its
// clamp at -87: a -inf logit's gradient is scale * exp(-87), as on cpu.
//
// Deterministic: one block per row, max and exp-sum over a fixed tree of the
// block's threads; loss_sum is a sum of kLossPartials partials over a
// partition of the rows that depends only on N (block p sums its rows in
// row order), which one block then sums in a fixed tree and adds into
// loss_sum once. The partials live in module memory (8 KiB; the op has no
// scratch and loss_sum is one element): calls on one device must not
// overlap, which the backend's one stream guarantees.
//
// Targets outside [-1, V) (cpu throws naming them; here that would need a
// copy back and a synchronize): forward adds NaN to loss_sum, backward writes
// the row as NaN. Nothing is read out of bounds.
#include <cstdint>

#include <math_constants.h>

#include "kernels_rows.h"

namespace headroom::cuda {

namespace {

using rows::block_max;
using rows::block_sum;
using rows::grid_for;
using rows::max_of;
using rows::store;
using rows::widen;

constexpr int kThreads = 512;
constexpr int kLossPartials = 1024;

__device__ double g_partials[kLossPartials];

// cpu_simd::exp_approx (Cephes expf, ~2 ulp, x clamped to [-87, 88], NaN
// stays NaN), the same operations in the same order.
constexpr float kExpShifter = 12582912.0f;  // 1.5 * 2^23
__device__ __forceinline__ float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = -x < -88.0f ? 88.0f : x;
  const float t = __fadd_rn(__fmul_rn(x, 1.44269504088896341f), kExpShifter);
  const float n = __fsub_rn(t, kExpShifter);
  float r = __fsub_rn(x, __fmul_rn(n, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
  float p = __fadd_rn(__fmul_rn(r, 1.9875691500e-4f), 1.3981999507e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
  p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
  p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
  p = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
  // 2^n from t's bits: t = shifter + n exactly (ulp 1 there).
  constexpr unsigned kBias = 0x4b400000u - 127u;  // the shifter's bits less the exponent bias
  return __fmul_rn(p, __uint_as_float((__float_as_uint(t) - kBias) << 23));
}

// Block p: rows [N p / parts, N (p + 1) / parts), each row's lse written and
// its loss added, in row order, into partials[p].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* lse,
                   int parts) {
  __shared__ float max_shared[32];
  __shared__ double sum_shared[32];
  const int64_t p = blockIdx.x;
  const int64_t begin = rows * p / parts, end = rows * (p + 1) / parts;
  double partial = 0;  // thread 0's
  for (int64_t i = begin; i < end; ++i) {
    const T* x = logits + i * vocab;
    float max = -CUDART_INF_F;
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads)
      max = max_of(max, widen(x[j]));
    max = block_max(max, max_shared);
    // Every logit -inf: the sum is 0, and exp(-inf - -inf) would be NaN.
    double row_lse = -CUDART_INF;
    if (max != -CUDART_INF_F) {  // the same for the whole block
      double sum = 0;
      for (int64_t j = threadIdx.x; j < vocab; j += kThreads)
        sum += static_cast<double>(exp_approx(__fsub_rn(widen(x[j]), max)));
      row_lse = static_cast<double>(max) + log(block_sum(sum, sum_shared));
    }
    if (threadIdx.x == 0) {
      lse[i] = static_cast<float>(row_lse);
      const int32_t target = targets[i];
      if (target >= 0 && target < vocab)
        partial += row_lse - static_cast<double>(widen(x[target]));
      else if (target != -1 && target != -2)
        partial += CUDART_NAN;  // outside [-2, V): the loss says so
    }
  }
  if (threadIdx.x == 0) g_partials[p] = partial;
}

__global__ void __launch_bounds__(kThreads) total_kernel(int parts, float* loss_sum) {
  __shared__ double shared[32];
  double sum = 0;
  for (int p = threadIdx.x; p < parts; p += kThreads)
    sum += g_partials[p];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) loss_sum[0] = static_cast<float>(static_cast<double>(loss_sum[0]) + sum);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(T* logits, const int32_t* targets, const float* lse, int64_t rows,
                    int64_t vocab, float scale) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    T* x = logits + i * vocab;
    const int32_t target = targets[i];
    if (target != -2 && (target < 0 || target >= vocab)) {
      const float fill = target == -1 ? 0.0f : CUDART_NAN_F;  // not counted / out of range
      for (int64_t j = threadIdx.x; j < vocab; j += kThreads)
        store(x + j, fill);
      continue;
    }
    const float row_lse = lse[i];
    // Each element is read and written by one thread; the target's own
    // thread subtracts the onehot from the logit it read.
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
      const float e = exp_approx(__fsub_rn(widen(x[j]), row_lse));
      store(x + j, j == target ? __fmul_rn(scale, __fsub_rn(e, 1.0f)) : __fmul_rn(scale, e));
    }
  }
}

template <typename T>
cudaError_t forward(const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                    float* lse, float* loss_sum, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;  // loss_sum += 0 leaves it as it is
  const int parts = rows < kLossPartials ? static_cast<int>(rows) : kLossPartials;
  forward_kernel<<<parts, kThreads, 0, stream>>>(logits, targets, rows, vocab, lse, parts);
  total_kernel<<<1, kThreads, 0, stream>>>(parts, loss_sum);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward(T* logits, const int32_t* targets, const float* lse, int64_t rows,
                     int64_t vocab, float scale, cudaStream_t stream) {
  if (rows == 0 || vocab == 0) return cudaSuccess;
  backward_kernel<<<grid_for(rows), kThreads, 0, stream>>>(logits, targets, lse, rows, vocab,
                                                           scale);
  return cudaGetLastError();
}

}  // namespace

cudaError_t cross_entropy_forward_f32(const float* logits, const int32_t* targets, int64_t rows,
                                      int64_t vocab, float* lse, float* loss_sum,
                                      cudaStream_t stream) {
  return forward(logits, targets, rows, vocab, lse, loss_sum, stream);
}

cudaError_t cross_entropy_forward_bf16(const uint16_t* logits, const int32_t* targets, int64_t rows,
                                       int64_t vocab, float* lse, float* loss_sum,
                                       cudaStream_t stream) {
  return forward(reinterpret_cast<const __nv_bfloat16*>(logits), targets, rows, vocab, lse,
                 loss_sum, stream);
}

cudaError_t cross_entropy_forward_f16(const uint16_t* logits, const int32_t* targets, int64_t rows,
                                      int64_t vocab, float* lse, float* loss_sum,
                                      cudaStream_t stream) {
  return forward(reinterpret_cast<const __half*>(logits), targets, rows, vocab, lse, loss_sum,
                 stream);
}

cudaError_t cross_entropy_backward_f32(float* logits, const int32_t* targets, const float* lse,
                                       int64_t rows, int64_t vocab, float scale,
                                       cudaStream_t stream) {
  return backward(logits, targets, lse, rows, vocab, scale, stream);
}

cudaError_t cross_entropy_backward_bf16(uint16_t* logits, const int32_t* targets, const float* lse,
                                        int64_t rows, int64_t vocab, float scale,
                                        cudaStream_t stream) {
  return backward(reinterpret_cast<__nv_bfloat16*>(logits), targets, lse, rows, vocab, scale,
                  stream);
}

cudaError_t cross_entropy_backward_f16(uint16_t* logits, const int32_t* targets, const float* lse,
                                       int64_t rows, int64_t vocab, float scale,
                                       cudaStream_t stream) {
  return backward(reinterpret_cast<__half*>(logits), targets, lse, rows, vocab, scale, stream);
}

}  // namespace headroom::cuda
