// Which matrix element each lane holds in the registers of one warp-wide
// tensor-core product, mma.sync.aligned.m16n8k16.row.col with 16-bit
// operands and fp32 accumulators (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"): D (16 x 8) = A (16 x 16) B (16 x 8)
// + C. Lane l is thread `l % 4` of group `l / 4`.
//
//   A: 4 registers of two 16-bit halves; register r, half e holds
//      A[group + 8 (r % 2)][2 thread + e + 8 (r / 2)].
//   B: 2 registers of two halves; register r, half e holds
//      B[2 thread + e + 8 r][group] (B's rows are k, its columns n).
//   C, D: 4 floats; float i holds C[group + 8 (i / 2)][2 thread + i % 2].
//
// The kernels address their shared-memory tiles through these functions,
// and tests/cuda/mma_fragments_test.cc checks them on the host against the
// table and against each other (C's layout of two adjacent n-tiles is A's
// of one k-step: FlashAttention-2 feeds the probabilities of S = Q K^T to
// P V from the registers they were computed in).
#pragma once

#if defined(__CUDACC__)
#define HEADROOM_MMA_HD __host__ __device__ __forceinline__
#else
#define HEADROOM_MMA_HD inline
#endif

namespace headroom::cuda::mma {

constexpr int kM = 16, kN = 8, kK = 16;

struct Cell {
  int row = 0, col = 0;
};

HEADROOM_MMA_HD constexpr Cell a_cell(int lane, int reg, int half) {
  return {lane / 4 + 8 * (reg % 2), 2 * (lane % 4) + half + 8 * (reg / 2)};
}

HEADROOM_MMA_HD constexpr Cell b_cell(int lane, int reg, int half) {
  return {2 * (lane % 4) + half + 8 * reg, lane / 4};
}

HEADROOM_MMA_HD constexpr Cell c_cell(int lane, int index) {
  return {lane / 4 + 8 * (index / 2), 2 * (lane % 4) + index % 2};
}

// The accumulator float of n-tile `2 t + reg / 2` that holds the element
// A register `reg`, half `half` of k-step t takes when the accumulators of
// two adjacent n-tiles become the A operand of the next product.
HEADROOM_MMA_HD constexpr int c_index_of_a(int reg, int half) {
  return 2 * (reg % 2) + half;
}

}  // namespace headroom::cuda::mma

#undef HEADROOM_MMA_HD
