// bf16 tile products on AVX512-BF16 (VDPBF16PS) for cpu flash attention:
// pairs of bf16 multiplied and summed at twice the rate of fp32 FMAs. The
// scores q.k and dO.v read two bf16 operands from memory; P V, dS K, P^T dO
// and dS^T Q read P or dS rounded to bf16 (round_transposed), as
// FlashAttention-2 does on GPUs. Used only where have_bf16_dot(), on a head
// dimension that is even; cpu/attention.cc keeps its fp32 tile products for
// everything else.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace headroom::attention_cpu {

// Whether this CPU runs VDPBF16PS on 256-bit vectors (AVX512_BF16 and
// AVX512VL; every such CPU also has the 512-bit form, which bf16_dot_tile
// uses for column blocks of 32) and HEADROOM_CPU_BF16_DOT is not "0".
// Checked once per process.
bool have_bf16_dot();

// Packs `rows` rows of `cols` bf16 (row c at src + c * stride, cols even)
// into pair-interleaved columns for bf16_dot_tile's B:
//   dst[p * ld + c] = src[c][2p] | src[c][2p + 1] << 16   (one 32-bit word)
// for p < cols / 2, c < rows; words [rows, ld) of each pair row are zero, so
// a product over the padded width reads zeros, never stale values.
// Requires have_bf16_dot() (its vector code is AVX2; the callers run it only
// where the products follow).
void pack_bf16_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols, uint32_t* dst,
                     int64_t ld);

// Packs `rows` rows of `cols` bf16 (row r at src + r * stride) in pairs of
// rows, for bf16_dot_tile's B over k = rows (rounded up to even):
//   dst[p * ld + x] = src[2p][x] | src[2p + 1][x] << 16
// for p < (rows + 1) / 2, x < cols; the missing row of an odd count reads as
// zero. ld >= cols. Requires have_bf16_dot(), as pack_bf16_pairs.
void pack_bf16_row_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols, uint32_t* dst,
                         int64_t ld);

// dst[c * ldd + r] = bf16(src[r * lds + c]), rounded to nearest even, for
// r < rows, c < cols; when rows is odd, dst[c * ldd + rows] = 0, so a
// product over k = rows rounded up to even reads a zero there. ldd >=
// rows + 1 when rows is odd. Denormal values may round to zero (VDPBF16PS
// reads them as zero either way). Requires have_bf16_dot().
void round_transposed(const float* src, int64_t lds, int64_t rows, int64_t cols, bf16* dst,
                      int64_t ldd);

// C (m x n) = A (m x k) B (k x n), or C += A B when `accumulate`: A's rows
// are bf16, contiguous in k, a_rs apart; B is packed in pairs along k
// ([k / 2][ldb] words: pack_bf16_pairs or pack_bf16_row_pairs); k even, any
// n (no column at or past n is read or written). Each C element is one sum
// over the pairs in order, starting from 0 or from C, each step
// acc += a[2p + 1] b[2p + 1] + a[2p] b[2p] as VDPBF16PS computes it (bf16
// products are exact in fp32; round to nearest even; denormal inputs and
// results flushed to zero), the same for every thread count.
// Requires have_bf16_dot().
void bf16_dot_tile(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t a_rs, const uint32_t* b,
                   int64_t ldb, float* c, int64_t ldc, bool accumulate = false);

}  // namespace headroom::attention_cpu
