// fp32 tile products on 16-lane (512-bit) vectors for cpu flash attention's
// fp32 route, where the CPU has AVX-512. The tile products are most of that
// route's time, and attention_kernels.h's tile_gemm runs them on 8-lane
// vectors: on a CPU with full-width 512-bit FMA units (Zen 5: 152 against
// 304 GFLOP/s per thread in a bare FMA loop; Sapphire Rapids) half of what
// the units do. Only tile_gemm_wide is compiled for x86-64-v4; callers reach
// it after have_wide_fma(), so the binary still runs on any x86-64.
#pragma once

#include <cstdint>

namespace headroom::attention_cpu {

// Whether this CPU has AVX-512 (x86-64-v4) and HEADROOM_CPU_WIDE_FMA is not
// "0". Checked once per process.
bool have_wide_fma();

// tile_gemm's product on 16 lanes: C (m x n) (+)= A (m x k) B (k x n), with
// A(r, p) = a[r * a_rs + p * a_cs] (any strides) and B's rows contiguous,
// B[p][j] = b[p * ldb + j]; accumulate = false ignores C's contents. Each C
// element is the same sequence of FMAs over p as in tile_gemm's FMA clones
// (started from C or from 0), so the bits are tile_gemm's whichever runs.
// Requires have_wide_fma().
void tile_gemm_wide(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                    const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

}  // namespace headroom::attention_cpu
