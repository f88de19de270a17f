// Entry points of the elementwise CUDA kernels beyond cuda/kernels.h's first
// fp32/bf16 ones: fill, add and cast for every dtype the cpu table has, and
// fill_uniform, scale, dropout, bias and swiglu. Every function launches on
// `stream` and returns the launch status; none synchronizes. Pointers are
// device pointers; bf16 and fp16 are raw uint16_t storage. Math is fp32 (the
// bias column sums: double), 16-bit inputs widened exactly on load and every
// stored element rounded once to nearest even, as the cpu ops do.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace headroom::cuda {

// x[i] = value rounded to fp16, n elements.
cudaError_t fill_f16(uint16_t* x, int64_t n, float value, cudaStream_t stream);
// x[i] = value (the host already truncated it, as the cpu fill does), n elements.
cudaError_t fill_i32(int32_t* x, int64_t n, int32_t value, cudaStream_t stream);
cudaError_t fill_i64(int64_t* x, int64_t n, int64_t value, cudaStream_t stream);
cudaError_t fill_u8(uint8_t* x, int64_t n, uint8_t value, cudaStream_t stream);

// out[i] = a[i] + b[i] in fp32, rounded once; out may alias a or b.
cudaError_t add_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                     cudaStream_t stream);
cudaError_t add_f16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                    cudaStream_t stream);

// out[i] = x[i] converted: fp32 <-> fp16 (widening exact, narrowing to nearest
// even), bf16 <-> fp16 through fp32 (one rounding), integers -> fp32 (to
// nearest above 2^24).
cudaError_t cast_f32_to_f16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream);
cudaError_t cast_f16_to_f32(const uint16_t* x, float* out, int64_t n, cudaStream_t stream);
cudaError_t cast_bf16_to_f16(const uint16_t* x, uint16_t* out, int64_t n, cudaStream_t stream);
cudaError_t cast_f16_to_bf16(const uint16_t* x, uint16_t* out, int64_t n, cudaStream_t stream);
cudaError_t cast_i32_to_f32(const int32_t* x, float* out, int64_t n, cudaStream_t stream);
cudaError_t cast_i64_to_f32(const int64_t* x, float* out, int64_t n, cudaStream_t stream);
cudaError_t cast_u8_to_f32(const uint8_t* x, float* out, int64_t n, cudaStream_t stream);

// x[i] = random_uniform(seed, i, lo, hi) (backend/common/rng.h), rounded to
// the storage dtype: the cpu's bits.
cudaError_t fill_uniform_f32(float* x, int64_t n, uint64_t seed, float lo, float hi,
                             cudaStream_t stream);
cudaError_t fill_uniform_bf16(uint16_t* x, int64_t n, uint64_t seed, float lo, float hi,
                              cudaStream_t stream);
cudaError_t fill_uniform_f16(uint16_t* x, int64_t n, uint64_t seed, float lo, float hi,
                             cudaStream_t stream);

// x[i] *= alpha in place (16-bit: in fp32, rounded once).
cudaError_t scale_f32(float* x, int64_t n, float alpha, cudaStream_t stream);
cudaError_t scale_bf16(uint16_t* x, int64_t n, float alpha, cudaStream_t stream);
cudaError_t scale_f16(uint16_t* x, int64_t n, float alpha, cudaStream_t stream);

// out[i] = dropout_keeps(seed, i, p) ? x[i] * dropout_scale(p) : +0
// (backend/common/dropout_mask.h); out may be x exactly.
cudaError_t dropout_f32(const float* x, float p, uint64_t seed, float* out, int64_t n,
                        cudaStream_t stream);
cudaError_t dropout_bf16(const uint16_t* x, float p, uint64_t seed, uint16_t* out, int64_t n,
                         cudaStream_t stream);
cudaError_t dropout_f16(const uint16_t* x, float p, uint64_t seed, uint16_t* out, int64_t n,
                        cudaStream_t stream);

// x[t, c] += bias[c] in place; x (rows, width) row-major, bias (width).
cudaError_t bias_forward_f32(float* x, const float* bias, int64_t rows, int64_t width,
                             cudaStream_t stream);
cudaError_t bias_forward_bf16(uint16_t* x, const uint16_t* bias, int64_t rows, int64_t width,
                              cudaStream_t stream);
cudaError_t bias_forward_f16(uint16_t* x, const uint16_t* bias, int64_t rows, int64_t width,
                             cudaStream_t stream);
// d_bias[c] = float(double(d_bias[c]) + sum over t in order of double(dy[t, c])),
// rounded once into d_bias's dtype; d_bias disjoint from dy.
cudaError_t bias_backward_f32(const float* dy, float* d_bias, int64_t rows, int64_t width,
                              cudaStream_t stream);
cudaError_t bias_backward_bf16(const uint16_t* dy, uint16_t* d_bias, int64_t rows, int64_t width,
                               cudaStream_t stream);
cudaError_t bias_backward_f16(const uint16_t* dy, uint16_t* d_bias, int64_t rows, int64_t width,
                              cudaStream_t stream);

// out = silu(gate) * up, the cpu's sigmoid (cpu/swiglu.cc) bit for bit; out
// may be gate or up exactly.
cudaError_t swiglu_forward_f32(const float* gate, const float* up, float* out, int64_t n,
                               cudaStream_t stream);
cudaError_t swiglu_forward_bf16(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n,
                                cudaStream_t stream);
cudaError_t swiglu_forward_f16(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n,
                               cudaStream_t stream);
// d_gate = d_out * up * silu'(gate), d_up = d_out * silu(gate); each output
// may be an input exactly; d_gate and d_up disjoint.
cudaError_t swiglu_backward_f32(const float* d_out, const float* gate, const float* up,
                                float* d_gate, float* d_up, int64_t n, cudaStream_t stream);
cudaError_t swiglu_backward_bf16(const uint16_t* d_out, const uint16_t* gate, const uint16_t* up,
                                 uint16_t* d_gate, uint16_t* d_up, int64_t n, cudaStream_t stream);
cudaError_t swiglu_backward_f16(const uint16_t* d_out, const uint16_t* gate, const uint16_t* up,
                                uint16_t* d_gate, uint16_t* d_up, int64_t n, cudaStream_t stream);

#if defined(__CUDACC__)
// What the kernels above share, nvcc only: how each floating dtype is widened
// on load and rounded on store (one type per dtype, so a kernel is written once
// as a template), and the grid of a grid-stride loop.
struct ElementF32 {
  using Storage = float;
  static __device__ __forceinline__ float load(float v) { return v; }
  static __device__ __forceinline__ float store(float v) { return v; }
};
struct ElementBF16 {
  using Storage = uint16_t;
  static __device__ __forceinline__ float load(uint16_t v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  static __device__ __forceinline__ uint16_t store(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
struct ElementF16 {
  using Storage = uint16_t;
  static __device__ __forceinline__ float load(uint16_t v) {
    return __half2float(__ushort_as_half(v));
  }
  static __device__ __forceinline__ uint16_t store(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

inline constexpr int kElementwiseThreads = 256;

// Blocks for n elements at kElementwiseThreads each, at least 1 and at most
// 65535: a grid-stride loop covers the rest, and the cap keeps launches of any
// n legal while still filling every SM many times over.
inline int elementwise_blocks(int64_t n) {
  int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}
#endif

}  // namespace headroom::cuda
