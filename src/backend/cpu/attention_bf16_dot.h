// bf16 tile products on AVX512-BF16 (VDPBF16PS) for cpu flash attention:
// the products whose two operands are bf16 in memory (scores q.k and dO.v)
// multiply pairs of bf16 at twice the rate of fp32 FMAs. Used only where
// have_bf16_dot(), on a head dimension that is even; cpu/attention.cc keeps
// its fp32 tile products for everything else.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace headroom::attention_cpu {

// Whether this CPU runs VDPBF16PS on 256-bit vectors (AVX512_BF16 and
// AVX512VL) and HEADROOM_CPU_BF16_DOT is not "0". Checked once per process.
bool have_bf16_dot();

// Packs `rows` rows of `cols` bf16 (row c at src + c * stride, cols even)
// into pair-interleaved columns for bf16_dot_tile's B:
//   dst[p * ld + c] = src[c][2p] | src[c][2p + 1] << 16   (one 32-bit word)
// for p < cols / 2, c < rows; words [rows, ld) of each pair row are zero, so
// a product over the padded width reads zeros, never stale values.
void pack_bf16_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols, uint32_t* dst,
                     int64_t ld);

// C (m x n) = A (m x k) B (k x n): A's rows are bf16, contiguous in k, a_rs
// apart; B is packed by pack_bf16_pairs ([k / 2][ldb] words); k even, n a
// multiple of 8. Each C element is one sum over the pairs in order, each
// step acc += a[2p + 1] b[2p + 1] + a[2p] b[2p] as VDPBF16PS computes it
// (bf16 products are exact in fp32; round to nearest even; denormal inputs
// and results flushed to zero), the same for every thread count.
// Requires have_bf16_dot().
void bf16_dot_tile(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t a_rs, const uint32_t* b,
                   int64_t ldb, float* c, int64_t ldc);

}  // namespace headroom::attention_cpu
