// Dtype conversions shared by the cpu kernels: the per-element pair every
// fp32-or-bf16 kernel template reads and writes through (math in fp32, one
// rounding per stored element), and the bulk loops of cast and gemm's bf16
// widening. Rounding to bf16 is to_bf16's round-to-nearest-even; widening
// bf16 to fp32 is exact.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace headroom {

// An element as fp32, from either storage dtype.
inline float widen(float v) {
  return v;
}
inline float widen(bf16 v) {
  return to_float(v);
}
// An fp32 result into either storage dtype (bf16: rounded to nearest even).
inline void store(float* p, float v) {
  *p = v;
}
inline void store(bf16* p, float v) {
  *p = to_bf16(v);
}

void widen_bf16(const bf16* src, float* dst, int64_t n);
void round_to_bf16(const float* src, bf16* dst, int64_t n);

}  // namespace headroom
