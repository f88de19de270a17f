// The GCC vector types the cpu kernels compute in, and the eight-lane loads
// and stores between them and fp32 / bf16 / fp16 memory (sixteen-lane ones
// for bf16). Always inlined, so a caller compiled for a wider ISA (a
// target_clones clone, cpu_clones.h) gets them in that ISA; GCC vector
// extensions keep accumulators in registers where auto-vectorization of the
// same loops does not reliably, and give 16 lanes where it picks 8.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

// The loads return 32-byte vectors by value; on a baseline (SSE) build GCC
// warns that such a call's ABI differs from an AVX build's. They are always
// inlined, so no such call exists (attention_kernels.h says more).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

#define HR_SIMD_INLINE inline __attribute__((always_inline))

namespace headroom::cpu_simd {

// Eight floats: one AVX register, or two SSE registers on a baseline build.
using v8f = float __attribute__((vector_size(32)));
using v8u32 = uint32_t __attribute__((vector_size(32)));
using v8i = int32_t __attribute__((vector_size(32)));
using v8u16 = uint16_t __attribute__((vector_size(16)));
// Sixteen floats: one AVX-512 register (cpu attention's softmax and swiglu's
// bf16 on CPUs that have them). Only ever run in code compiled for AVX-512: for
// x86-64-v3 GCC 12 splits them lane by lane (cpu_clones.h).
using v16f = float __attribute__((vector_size(64)));
using v16u32 = uint32_t __attribute__((vector_size(64)));
using v16i = int32_t __attribute__((vector_size(64)));
using v16u16 = uint16_t __attribute__((vector_size(32)));

// p[0 .. 8) as fp32. Every widening is exact.
HR_SIMD_INLINE v8f load8(const float* p) {
  v8f v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
// bf16 is the top half of an fp32: a shift per lane.
HR_SIMD_INLINE v8f load8(const bf16* p) {
  v8u16 h;
  __builtin_memcpy(&h, p, sizeof h);
  const v8u32 w = __builtin_convertvector(h, v8u32) << 16;
  v8f v;
  __builtin_memcpy(&v, &w, sizeof v);
  return v;
}
// fp16 lane by lane (to_float's bit arithmetic).
HR_SIMD_INLINE v8f load8(const f16* p) {
  v8f v;
  for (int i = 0; i < 8; ++i)
    v[i] = to_float(p[i]);
  return v;
}
HR_SIMD_INLINE void store8(float* p, const v8f& v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// p[0 .. 16) as fp32; bf16 by the same shift as load8.
HR_SIMD_INLINE v16f load16(const bf16* p) {
  v16u16 h;
  __builtin_memcpy(&h, p, sizeof h);
  const v16u32 w = __builtin_convertvector(h, v16u32) << 16;
  v16f v;
  __builtin_memcpy(&v, &w, sizeof v);
  return v;
}
// Sixteen fp32 lanes rounded into bf16 exactly as to_bf16 rounds one: to
// nearest even, a NaN kept a quiet NaN.
HR_SIMD_INLINE void store16(bf16* p, const v16f& v) {
  v16u32 u;
  __builtin_memcpy(&u, &v, sizeof u);
  const v16u32 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const v16u32 quiet_nan = (u >> 16) | 0x40u;
  const v16u32 bits = (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  const v16u16 h = __builtin_convertvector(bits, v16u16);
  __builtin_memcpy(p, &h, sizeof h);
}

}  // namespace headroom::cpu_simd

#pragma GCC diagnostic pop
