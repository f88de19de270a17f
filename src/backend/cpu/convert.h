// Dtype conversions shared by the cpu kernels: the per-element pair every
// floating kernel template reads and writes through (math in fp32, one
// rounding per stored element), the one switch from a floating dtype to its
// C++ type, and the bulk loops of cast and gemm's widening. Rounding to bf16
// or fp16 is to nearest even; widening either to fp32 is exact.
#pragma once

#include <cstdint>

#include "backend/cpu/floating_type.h"
#include "tensor/dtype.h"

namespace headroom {

// An element as fp32, from either storage dtype.
inline float widen(float v) {
  return v;
}
inline float widen(bf16 v) {
  return to_float(v);
}
inline float widen(f16 v) {
  return to_float(v);
}
// An fp32 result into either storage dtype (bf16: rounded to nearest even).
inline void store(float* p, float v) {
  *p = v;
}
inline void store(bf16* p, float v) {
  *p = to_bf16(v);
}
inline void store(f16* p, float v) {
  *p = to_f16(v);
}

void widen_bf16(const bf16* src, float* dst, int64_t n);
void round_to_bf16(const float* src, bf16* dst, int64_t n);
void widen_f16(const f16* src, float* dst, int64_t n);
void round_to_f16(const float* src, f16* dst, int64_t n);

}  // namespace headroom
