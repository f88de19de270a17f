// The small dense pieces cpu flash attention is built from: tile products, a
// tile transpose, and the masked softmax updates (over eight queries at
// a time, or along one query's row). Header-only and always inlined, so each
// caller compiled for a wider ISA (cpu/attention.cc builds an AVX2+FMA clone
// of each work item, see there) gets them in that ISA; nothing here
// allocates, every buffer is the caller's.
//
// Every result is a fixed function of the inputs: sums run in a fixed order
// that depends only on the sizes, never on threads or on where a tile sits.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/exp_approx.h"
#include "backend/cpu/simd_vectors.h"
#include "tensor/dtype.h"

// The helpers below return 32-byte vectors by value; on a baseline (SSE)
// build GCC warns that such a call's ABI differs from an AVX build's. They
// are always inlined, so no such call exists. Templates are instantiated at
// the end of the including file, outside this push / pop: includers that
// instantiate them with v8f silence -Wpsabi for their whole file too.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

#define HR_ATTENTION_INLINE inline __attribute__((always_inline))

namespace headroom::attention_cpu {

using cpu_simd::exp_approx;
using cpu_simd::load8;
using cpu_simd::store8;
using cpu_simd::v8f;
using cpu_simd::v8i;
using cpu_simd::v8u32;

HR_ATTENTION_INLINE float widen(float x) {
  return x;
}
HR_ATTENTION_INLINE float widen(bf16 x) {
  return to_float(x);
}
HR_ATTENTION_INLINE float widen(f16 x) {
  return to_float(x);
}

inline int64_t round_up8(int64_t n) {
  return (n + 7) / 8 * 8;
}

// kLanes floats: v8f (one AVX register), or, for attention_wide_fma.cc's
// AVX-512 tile products, 16 (one 512-bit register).
// (Spelled out per width: GCC drops a vector_size that depends on a template
// parameter.)
template <int kLanes>
struct LaneVector;
template <>
struct LaneVector<8> {
  using type = v8f;
};
template <>
struct LaneVector<16> {
  using type = cpu_simd::v16f;
};
template <int kLanes>
using lane_vector = typename LaneVector<kLanes>::type;

// kLanes consecutive elements as fp32: 16 only from fp32 (the wide
// products' operands are fp32 tiles), 8 from any dtype.
template <int kLanes, typename T>
HR_ATTENTION_INLINE lane_vector<kLanes> load_lanes(const T* p) {
  if constexpr (kLanes == 8) {
    return load8(p);
  } else {
    static_assert(std::is_same_v<T, float>, "16 lanes load fp32 only");
    lane_vector<kLanes> v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
  }
}
template <int kLanes>
HR_ATTENTION_INLINE void store_lanes(float* p, const lane_vector<kLanes>& v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// kRows rows of C (+)= A B: C[r][j] = (accumulate ? C[r][j] : 0) +
// sum_{p < k} A(r, p) * B[p][j], for j < n. A(r, p) = a[r * a_rs + p * a_cs]
// (any strides: its elements are broadcast, so a transposed A costs nothing);
// B's rows are contiguous: B[p][j] = b[p * ldb + j]. Column blocks of
// 2 * kLanes, then kLanes, then the rest (8 lanes' blocks after 16, else one
// column at a time). Each C element is one sequential sum over p, whichever
// block its column falls in and whatever kLanes: the blocking never changes
// a bit.
template <int kRows, int kLanes = 8, typename TA, typename TB>
HR_ATTENTION_INLINE void gemm_rows(int64_t n, int64_t k, const TA* a, int64_t a_rs, int64_t a_cs,
                                   const TB* b, int64_t ldb, float* c, int64_t ldc,
                                   bool accumulate) {
  using V = lane_vector<kLanes>;
  int64_t j = 0;
  // 2 * kLanes columns x kRows rows: 2 * kRows accumulators, two B loads and
  // kRows broadcasts per step of p.
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    V acc[kRows][2];
    for (int r = 0; r < kRows; ++r) {
      acc[r][0] = accumulate ? load_lanes<kLanes>(c + r * ldc + j) : V{};
      acc[r][1] = accumulate ? load_lanes<kLanes>(c + r * ldc + j + kLanes) : V{};
    }
    for (int64_t p = 0; p < k; ++p) {
      const V b0 = load_lanes<kLanes>(b + p * ldb + j);
      const V b1 = load_lanes<kLanes>(b + p * ldb + j + kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const float x = widen(a[r * a_rs + p * a_cs]);
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
    for (int r = 0; r < kRows; ++r) {
      store_lanes<kLanes>(c + r * ldc + j, acc[r][0]);
      store_lanes<kLanes>(c + r * ldc + j + kLanes, acc[r][1]);
    }
  }
  for (; j + kLanes <= n; j += kLanes) {
    V acc[kRows];
    for (int r = 0; r < kRows; ++r)
      acc[r] = accumulate ? load_lanes<kLanes>(c + r * ldc + j) : V{};
    for (int64_t p = 0; p < k; ++p) {
      const V b0 = load_lanes<kLanes>(b + p * ldb + j);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r)
        acc[r] += widen(a[r * a_rs + p * a_cs]) * b0;
    }
    for (int r = 0; r < kRows; ++r)
      store_lanes<kLanes>(c + r * ldc + j, acc[r]);
  }
  if constexpr (kLanes > 8) {
    if (j < n) gemm_rows<kRows, 8>(n - j, k, a, a_rs, a_cs, b + j, ldb, c + j, ldc, accumulate);
  } else {
    for (; j < n; ++j) {
      for (int r = 0; r < kRows; ++r) {
        float acc = accumulate ? c[r * ldc + j] : 0.0f;
        for (int64_t p = 0; p < k; ++p)
          acc += widen(a[r * a_rs + p * a_cs]) * widen(b[p * ldb + j]);
        c[r * ldc + j] = acc;
      }
    }
  }
}

// C (m x n) (+)= A (m x k) B (k x n), strides as in gemm_rows, on kLanes-wide
// vectors (16: attention_wide_fma.cc, compiled for AVX-512).
template <int kLanes = 8, typename TA, typename TB>
HR_ATTENTION_INLINE void tile_gemm(int64_t m, int64_t n, int64_t k, const TA* a, int64_t a_rs,
                                   int64_t a_cs, const TB* b, int64_t ldb, float* c, int64_t ldc,
                                   bool accumulate) {
  int64_t i = 0;
  // On 16 lanes (32 vector registers) eight rows at a time: 16 accumulators,
  // enough independent FMA chains for two FMA units, and fewer loads per
  // FMA. Eight lanes have 16 registers: four rows.
  if constexpr (kLanes == 16)
    for (; i + 8 <= m; i += 8)
      gemm_rows<8, kLanes>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
  for (; i + 4 <= m; i += 4)
    gemm_rows<4, kLanes>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
  const TA* a_tail = a + i * a_rs;
  float* c_tail = c + i * ldc;
  switch (m - i) {
    case 3:
      gemm_rows<3, kLanes>(n, k, a_tail, a_rs, a_cs, b, ldb, c_tail, ldc, accumulate);
      break;
    case 2:
      gemm_rows<2, kLanes>(n, k, a_tail, a_rs, a_cs, b, ldb, c_tail, ldc, accumulate);
      break;
    case 1:
      gemm_rows<1, kLanes>(n, k, a_tail, a_rs, a_cs, b, ldb, c_tail, ldc, accumulate);
      break;
    default:
      break;
  }
}

// Eight rows of eight floats transposed in registers: on return r[j][i] is
// what r[i][j] was (unpack pairs, then quads, then 128-bit halves: the
// classic 8x8 sequence, which GCC lowers to vunpck / vshufps / vperm2f128).
HR_ATTENTION_INLINE void transpose8x8(v8f (&r)[8]) {
  v8f t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], v8i{0, 8, 1, 9, 4, 12, 5, 13});
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], v8i{2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shuffle(t[i], t[i + 2], v8i{0, 1, 8, 9, 4, 5, 12, 13});
    u[i + 1] = __builtin_shuffle(t[i], t[i + 2], v8i{2, 3, 10, 11, 6, 7, 14, 15});
    u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], v8i{0, 1, 8, 9, 4, 5, 12, 13});
    u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], v8i{2, 3, 10, 11, 6, 7, 14, 15});
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = __builtin_shuffle(u[i], u[i + 4], v8i{0, 1, 2, 3, 8, 9, 10, 11});
    r[i + 4] = __builtin_shuffle(u[i], u[i + 4], v8i{4, 5, 6, 7, 12, 13, 14, 15});
  }
}

// dst[d * ld + c] = src[c * src_stride + d] for c < rows, d < cols, widened
// to fp32; columns [rows, ld) of dst are zeroed, so a product over the padded
// width reads zeros, never stale values. ld >= round_up8(rows). Blocks of
// 8 x 8 go through registers (a missing row of the last block reads as zeros,
// which is the padding); only a head_dim that is not a multiple of 8 leaves
// columns to the element loop. The values are copied, so no bit depends on
// the blocking.
template <typename T>
HR_ATTENTION_INLINE void transpose_tile(const T* src, int64_t src_stride, int64_t rows,
                                        int64_t cols, float* dst, int64_t ld) {
  const int64_t padded = round_up8(rows);
  int64_t d0 = 0;
  for (; d0 + 8 <= cols; d0 += 8)
    for (int64_t c0 = 0; c0 < padded; c0 += 8) {
      v8f block[8];
      for (int i = 0; i < 8; ++i)
        block[i] = c0 + i < rows ? load8(src + (c0 + i) * src_stride + d0) : v8f{};
      transpose8x8(block);
      for (int i = 0; i < 8; ++i)
        store8(dst + (d0 + i) * ld + c0, block[i]);
    }
  for (int64_t d = d0; d < cols; ++d) {
    for (int64_t c = 0; c < rows; ++c)
      dst[d * ld + c] = widen(src[c * src_stride + d]);
    for (int64_t c = rows; c < padded; ++c)
      dst[d * ld + c] = 0.0f;
  }
  for (int64_t d = 0; d < cols; ++d)
    for (int64_t c = padded; c < ld; ++c)
      dst[d * ld + c] = 0.0f;
}

inline constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// kLanes int32 lanes, the masks and indices beside lane_vector<kLanes>.
using cpu_simd::v16i;
template <int kLanes>
struct LaneInts;
template <>
struct LaneInts<8> {
  using type = v8i;
};
template <>
struct LaneInts<16> {
  using type = v16i;
};
template <int kLanes>
using lane_ints = typename LaneInts<kLanes>::type;

template <int kLanes>
HR_ATTENTION_INLINE lane_ints<kLanes> load_int_lanes(const int32_t* p) {
  lane_ints<kLanes> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
// first, first + 1, ..., first + kLanes - 1.
template <int kLanes>
HR_ATTENTION_INLINE lane_ints<kLanes> lane_indices(int64_t first) {
  lane_ints<kLanes> v;
  for (int l = 0; l < kLanes; ++l)
    v[l] = static_cast<int32_t>(first) + l;
  return v;
}

// All ones in the lanes where lo <= x < hi, else 0: the sign of
// (x - lo) | (hi - 1 - x), without a comparison (|x|, |lo|, |hi| are tile
// offsets, far from overflow). On 16 lanes GCC 12 lowers an AND of two
// comparisons, or a select on one, around an exp_approx into lane-by-lane
// branches, each computing its own scalar exp.
template <typename I>
HR_ATTENTION_INLINE I inside(const I& x, const I& lo, const I& hi) {
  return ~(((x - lo) | (hi - 1 - x)) >> 31);
}

// All ones in the lanes of v that are not -inf, else 0, from the bits: x =
// v's bits XOR -inf's is 0 only there; (x >> 1) | (x & 1) keeps that and
// fits in 31 bits, so its negation cannot overflow.
template <typename V, typename I>
HR_ATTENTION_INLINE I not_minus_infinity(const V& v) {
  static_assert(sizeof(V) == sizeof(I));
  I x;
  __builtin_memcpy(&x, &v, sizeof x);
  x ^= std::bit_cast<int32_t>(kMinusInfinity);
  const I t = (x >> 1) | (x & 1);
  return (t | -t) >> 31;
}

// a where `in`'s lane is all ones, b where it is 0: bitwise, not
// `in != 0 ? a : b` (see inside()). masked(v, in) is v or +0.
template <typename V, typename I>
HR_ATTENTION_INLINE V select_bits(const I& in, const V& a, const V& b) {
  static_assert(sizeof(V) == sizeof(I));
  I a_bits, b_bits;
  __builtin_memcpy(&a_bits, &a, sizeof a_bits);
  __builtin_memcpy(&b_bits, &b, sizeof b_bits);
  const I bits = (a_bits & in) | (b_bits & ~in);
  V out;
  __builtin_memcpy(&out, &bits, sizeof out);
  return out;
}
template <typename V, typename I>
HR_ATTENTION_INLINE V masked(const V& v, const I& in) {
  return select_bits(in, v, V{});
}

// The softmax pieces below run on 16 lanes when the caller says `wide` (the
// Problem's flag: a CPU with AVX-512, where the work items run their
// x86-64-v4 clone) and on 8 otherwise. Every lane does the same operations
// at either width, so the bits are the same (attention_wide_fma_test.cc);
// 16 lanes on an AVX2 CPU would only be 8-lane code with twice the register
// pressure.

// Calls body.operator()<16>(i) on blocks [i, i + 16) of [0, n) while `wide`,
// then body.operator()<8>(i) on blocks of 8 to the end (n a multiple of 8).
// The body is a lambda marked HR_ATTENTION_LAMBDA: a lambda is a function of
// its own, which the caller's target_clones clone does not cover, so it must
// be inlined into it to run in the clone's ISA.
#define HR_ATTENTION_LAMBDA __attribute__((always_inline))
template <typename Body>
HR_ATTENTION_INLINE void for_lane_blocks(int64_t n, bool wide, Body&& body) {
  int64_t i = 0;
  if (wide)
    for (; i + 16 <= n; i += 16)
      body.template operator()<16>(i);
  for (; i < n; i += 8)
    body.template operator()<8>(i);
}

// ---- scores with keys as rows: s_t[c][r] = k_c . q_r (forward, dq pass) ----
// Query r's visible keys in the tile are [lo[r], hi[r]); padding columns have
// lo = hi = 0. Eight or sixteen queries are updated at once, so nothing is
// transposed per tile: q and dO are transposed once per query tile instead.

// Queries [r, r + kLanes) of softmax_update_by_columns.
template <int kLanes>
HR_ATTENTION_INLINE void softmax_update_lanes(float* s_t, int64_t keys, int64_t ld, int64_t r,
                                              const int32_t* lo, const int32_t* hi, float scale,
                                              float* max, float* sum, float* rescale) {
  using V = lane_vector<kLanes>;
  using I = lane_ints<kLanes>;
  const I lo_v = load_int_lanes<kLanes>(lo + r), hi_v = load_int_lanes<kLanes>(hi + r);
  const V old_max = load_lanes<kLanes>(max + r);
  V tile_max = V{} + kMinusInfinity;
  for (int64_t c = 0; c < keys; ++c) {
    const int32_t key = static_cast<int32_t>(c);
    const I in = inside(I{} + key, lo_v, hi_v);
    const V x = load_lanes<kLanes>(s_t + c * ld + r) * scale;
    const V candidate = select_bits(in, x, V{} + kMinusInfinity);
    tile_max = candidate > tile_max ? candidate : tile_max;
  }
  const V new_max = old_max > tile_max ? old_max : tile_max;
  const V factor = masked(exp_approx(old_max - new_max), not_minus_infinity<V, I>(old_max));
  V tile_sum{};
  for (int64_t c = 0; c < keys; ++c) {
    const int32_t key = static_cast<int32_t>(c);
    const I in = inside(I{} + key, lo_v, hi_v);
    float* at = s_t + c * ld + r;
    const V p = masked(exp_approx(load_lanes<kLanes>(at) * scale - new_max), in);
    store_lanes<kLanes>(at, p);
    tile_sum += p;
  }
  store_lanes<kLanes>(max + r, new_max);
  store_lanes<kLanes>(sum + r, load_lanes<kLanes>(sum + r) * factor + tile_sum);
  store_lanes<kLanes>(rescale + r, factor);
}

// The online-softmax update of every query of the tile over its `keys` rows
// (ld a multiple of 8). Afterwards s_t holds p = exp(scale * score -
// new_max) (0 where masked); max and sum are updated; rescale[r] =
// exp(old_max - new_max) is the factor the output rows must be multiplied by
// (0 while max was -inf).
HR_ATTENTION_INLINE void softmax_update_by_columns(float* s_t, int64_t keys, int64_t ld,
                                                   const int32_t* lo, const int32_t* hi,
                                                   float scale, float* max, float* sum,
                                                   float* rescale, bool wide) {
  for_lane_blocks(ld, wide, [&]<int kLanes>(int64_t r) HR_ATTENTION_LAMBDA {
    softmax_update_lanes<kLanes>(s_t, keys, ld, r, lo, hi, scale, max, sum, rescale);
  });
}

// Queries [r, r + kLanes) of score_gradients_by_columns.
template <int kLanes>
HR_ATTENTION_INLINE void score_gradients_lanes(float* s_t, const float* dp_t, int64_t keys,
                                               int64_t ld, int64_t r, const int32_t* lo,
                                               const int32_t* hi, float scale, const float* lse,
                                               const float* delta) {
  using V = lane_vector<kLanes>;
  using I = lane_ints<kLanes>;
  const I lo_v = load_int_lanes<kLanes>(lo + r), hi_v = load_int_lanes<kLanes>(hi + r);
  const V lse_v = load_lanes<kLanes>(lse + r), delta_v = load_lanes<kLanes>(delta + r);
  for (int64_t c = 0; c < keys; ++c) {
    const int32_t key = static_cast<int32_t>(c);
    const I in = inside(I{} + key, lo_v, hi_v);
    float* at = s_t + c * ld + r;
    const V p = masked(exp_approx(load_lanes<kLanes>(at) * scale - lse_v), in);
    store_lanes<kLanes>(at, p * (load_lanes<kLanes>(dp_t + c * ld + r) - delta_v));
  }
}

// Backward's dq pass: s_t <- dS^T = P^T * (dP^T - delta), with P^T =
// exp(scale * score - lse) recomputed where visible and 0 elsewhere.
HR_ATTENTION_INLINE void score_gradients_by_columns(float* s_t, const float* dp_t, int64_t keys,
                                                    int64_t ld, const int32_t* lo,
                                                    const int32_t* hi, float scale,
                                                    const float* lse, const float* delta,
                                                    bool wide) {
  for_lane_blocks(ld, wide, [&]<int kLanes>(int64_t r) HR_ATTENTION_LAMBDA {
    score_gradients_lanes<kLanes>(s_t, dp_t, keys, ld, r, lo, hi, scale, lse, delta);
  });
}

// ---- scores with queries as rows: s[r][c] = q_r . k_c (dk / dv pass) ----

// Columns [c, c + kLanes) of probabilities_row.
template <int kLanes>
HR_ATTENTION_INLINE void probabilities_lanes(float* s, int64_t c, int64_t lo, int64_t hi,
                                             float scale, float lse) {
  using I = lane_ints<kLanes>;
  const I index = lane_indices<kLanes>(c);
  const I in = inside(index, I{} + static_cast<int32_t>(lo), I{} + static_cast<int32_t>(hi));
  store_lanes<kLanes>(s + c, masked(exp_approx(load_lanes<kLanes>(s + c) * scale - lse), in));
}

// One query row: s[c] <- exp(scale * s[c] - lse) on [lo, hi), 0 elsewhere in
// [0, width) (width a multiple of 8).
HR_ATTENTION_INLINE void probabilities_row(float* s, int64_t width, int64_t lo, int64_t hi,
                                           float scale, float lse, bool wide) {
  for_lane_blocks(width, wide, [&]<int kLanes>(int64_t c) HR_ATTENTION_LAMBDA {
    probabilities_lanes<kLanes>(s, c, lo, hi, scale, lse);
  });
}

// One query row: s[c] <- s[c] * (dp[c] - delta): P becomes dS.
HR_ATTENTION_INLINE void score_gradients_row(float* s, const float* dp, int64_t width,
                                             float delta) {
  for (int64_t c = 0; c < width; c += 8)
    store8(s + c, load8(s + c) * (load8(dp + c) - delta));
}

}  // namespace headroom::attention_cpu

#pragma GCC diagnostic pop
