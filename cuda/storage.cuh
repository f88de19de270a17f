// How kernels read and write elements of each floating dtype.
// Storage<D>: how a kernel templated on a dtype tag reads and writes its
// elements: fp32 (D = float) as itself, bf16 and fp16 (D = Bf16, F16) as raw
// uint16_t, widened exactly to fp32 on load and rounded once to nearest even
// on store, the cpu's convert.h rounding. nvcc only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace headroom::cuda {

struct Bf16 {};
struct F16 {};

template <typename D>
struct Storage {
  using T = float;
  static __device__ float widen(float x) { return x; }
  static __device__ float round(float x) { return x; }
};
template <>
struct Storage<Bf16> {
  using T = uint16_t;
  static __device__ float widen(uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
  static __device__ uint16_t round(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};
template <>
struct Storage<F16> {
  using T = uint16_t;
  static __device__ float widen(uint16_t x) { return __half2float(__ushort_as_half(x)); }
  static __device__ uint16_t round(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

// The same pair for kernels templated on CUDA's own element types: an
// element as fp32 (exact), and an fp32 result into its storage dtype.
__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float widen(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}

}  // namespace headroom::cuda
