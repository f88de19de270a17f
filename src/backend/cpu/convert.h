// Elementwise dtype conversions shared by cpu ops (cast, and gemm's bf16
// widening). Rounding to bf16 is to_bf16's round-to-nearest-even; widening
// bf16 to fp32 is exact.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace headroom {

void widen_bf16(const bf16* src, float* dst, int64_t n);
void round_to_bf16(const float* src, bf16* dst, int64_t n);

}  // namespace headroom
