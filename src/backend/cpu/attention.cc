// attention: block-sparse flash attention over a packed (THD) batch.
//   q (T, H*D), k and v (T, KV*D), fp32 or bf16; query head h reads kv head
//   h / (H / KV) (GQA). Documents are [cu_seqlens[i], cu_seqlens[i+1]);
//   query i sees the keys [lo(i), hi(i)) of the mask's kind
//   (common/attention_mask.h: document, causal, sliding_window, dflash_block).
// forward:  out (T, H*D) in q's dtype; lse (H, T) fp32 = logsumexp over the
//   visible keys of scale * q.k. Only lse is saved: backward recomputes the
//   probabilities from it, tile by tile, and the T x T scores never exist.
// backward: dq, dk, dv written, in q's dtype (FlashAttention-2's equations:
//   D_i = rowsum(dO_i * O_i); P = exp(scale S - lse); dV = P^T dO;
//   dP = dO V^T; dS = P * (dP - D); dQ = scale dS K; dK = scale dS^T Q).
//   A kv head's dk / dv sum over the query heads that share it.
// Tiles: block_size x block_size over the T axis (common/attention_tiles.h):
// fully masked tiles are never touched, fully visible ones are not masked,
// the rest keep each row's visible interval, from the same predicate. fp32
// accumulation throughout; 16-bit operands are widened once per tile and
// results rounded once, on store. bf16 on a CPU with AVX512-BF16 runs every
// tile product on VDPBF16PS instead (attention_bf16_dot.h): the scores and
// dO.v from the bf16 operands, P V, dS K, P^T dO and dS^T Q from P and dS
// rounded to bf16 (FlashAttention-2's rounding; fp32 accumulation still).
// Determinism: every output element is owned by one work item and summed in
// a fixed order, so the bits do not depend on the thread count or schedule.
// Forward works on (head, query tile); backward in two passes, dq over
// (head, query tile) and dk / dv over (kv head, key tile), each recomputing
// the probabilities it needs (7 tile products per tile pair instead of
// FlashAttention-2's 5, in exchange for no atomics and no dq partials).
// Allocates: forward nothing; backward attention.delta (H, T) fp32,
// workspace, held for the call (attention_checks.h). Tile buffers are on the
// stack, at most 1 MiB per thread (kMaxAttentionBlockSize / HeadDim).
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/attention_checks.h"
#include "backend/common/attention_tiles.h"
#include "backend/cpu/attention_bf16_dot.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/attention_wide_fma.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/floating_type.h"

// The kernels' templates are instantiated at the end of this file with 32-byte
// vectors, always inlined: see attention_kernels.h.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace headroom {

namespace {

using namespace attention_cpu;

constexpr int64_t kMaxB = kMaxAttentionBlockSize;
constexpr int64_t kMaxD = kMaxAttentionHeadDim;

// A work item runs alone below this many multiply-adds in the whole call:
// forking the OpenMP team costs more than it saves. Only speed depends on it.
constexpr double kMinParallelWork = 1 << 20;

HR_ATTENTION_INLINE float store_value(float x, float*) {
  return x;
}
HR_ATTENTION_INLINE bf16 store_value(float x, bf16*) {
  return to_bf16(x);
}
HR_ATTENTION_INLINE f16 store_value(float x, f16*) {
  return to_f16(x);
}

// dst[c] = src[c] * factor for c < n, rounded to T: a row of out, dq, dk or
// dv leaving its fp32 accumulator. The restrict lets the loop vectorize: a
// store through a T* could otherwise alias the Problem a factor is read from.
template <typename T>
HR_ATTENTION_INLINE void store_scaled_row(const float* __restrict src, float factor, int64_t n,
                                          T* __restrict dst) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    dst[c] = store_value(src[c] * factor, dst);
}

// One call's operands as raw pointers, and what every work item needs to
// know. A token's row of head h starts at h * D; rows are `*_stride` apart.
template <typename T>
struct Problem {
  AttentionDims dims;
  const AttentionTilePlan* plan = nullptr;
  const std::vector<int32_t>* cu_seqlens = nullptr;
  float scale = 0;
  int64_t q_stride = 0;   // H * D: q, out, d_out, dq
  int64_t kv_stride = 0;  // KV * D: k, v, dk, dv
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  T* out = nullptr;      // forward
  float* lse = nullptr;  // forward: written; backward: read
  const T* d_out = nullptr;
  const float* delta = nullptr;
  T* dq = nullptr;
  T* dk = nullptr;
  T* dv = nullptr;
  // bf16 only: every tile product runs on VDPBF16PS (attention_bf16_dot.h),
  // when the CPU has it and head_dim is even: the "dot route".
  bool dot = false;
  // The fp32 route's tile products run on 16 lanes (attention_wide_fma.h),
  // when the CPU has AVX-512: the same bits as on 8.
  bool wide = false;
};

// Whether an item takes the dot route: a constant false for fp32 and fp16.
template <typename T>
HR_ATTENTION_INLINE bool dot_route(const Problem<T>& p) {
  if constexpr (std::is_same_v<T, bf16>)
    return p.dot;
  else
    return false;
}

// An fp32-route tile product (tile_gemm's contract): on 16 lanes where the
// problem says so, else on 8; the bits are the same.
template <typename T>
HR_ATTENTION_INLINE void tile_product(const Problem<T>& p, int64_t m, int64_t n, int64_t k,
                                      const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                                      int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (p.wide)
    tile_gemm_wide(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  else
    tile_gemm(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

// A tile-sized buffer that the fp32 route and the dot route use for
// different things: an fp32 copy of a tile (widened, or transposed), a tile
// packed in pairs of rows, or P / dS rounded to bf16 and transposed. Each
// item takes one route, so one buffer serves both and the stack stays at the
// fp32 route's size.
union TileBuffer {
  float fp32[kMaxB * kMaxD];
  uint32_t row_pairs[kMaxB / 2 * kMaxD];  // [ceil(rows / 2)][D]
  bf16 rounded[kMaxB * kMaxB];            // [m][k rounded up to even]
};

template <typename T>
Problem<T> make_problem(const AttentionDims& dims, const AttentionTilePlan& plan,
                        const std::vector<int32_t>& cu_seqlens, float scale, const Tensor& q,
                        const Tensor& k, const Tensor& v) {
  Problem<T> p;
  p.dims = dims;
  p.plan = &plan;
  p.cu_seqlens = &cu_seqlens;
  p.scale = scale;
  p.q_stride = dims.heads * dims.head_dim;
  p.kv_stride = dims.kv_heads * dims.head_dim;
  p.q = q.data<T>();
  p.k = k.data<T>();
  p.v = v.data<T>();
  p.dot = std::is_same_v<T, bf16> && dims.head_dim % 2 == 0 && have_bf16_dot();
  p.wide = have_wide_fma();
  return p;
}

// Where one tile sits: rows [q0, q0 + nq) of queries, [k0, k0 + nk) of keys.
struct TileSpan {
  int64_t q0, nq, k0, nk;
};
TileSpan span_of(const AttentionDims& d, int64_t query_tile, int64_t key_tile) {
  TileSpan s;
  s.q0 = query_tile * d.block_size;
  s.nq = std::min(d.block_size, d.tokens - s.q0);
  s.k0 = key_tile * d.block_size;
  s.nk = std::min(d.block_size, d.tokens - s.k0);
  return s;
}

// The visible keys [lo, hi) of a row of a tile, relative to its first key;
// empty when lo >= hi. `keys` is the row's visible key interval in tokens
// (attention_mask.h).
HR_ATTENTION_INLINE void visible_columns(const TileSpan& s, TileKind kind, const KeyInterval& keys,
                                         int64_t& lo, int64_t& hi) {
  if (kind == TileKind::kFull) {
    lo = 0;
    hi = s.nk;
    return;
  }
  lo = std::clamp<int64_t>(keys.lo - s.k0, 0, s.nk);
  hi = std::clamp<int64_t>(keys.hi - s.k0, 0, s.nk);
}

// The same for every row of a tile at once, padded to `ld` rows with empty
// intervals (the padding queries see nothing and are never stored).
HR_ATTENTION_INLINE void visible_columns(const TileSpan& s, TileKind kind, const KeyInterval* keys,
                                         int64_t ld, int32_t* lo, int32_t* hi) {
  for (int64_t r = 0; r < ld; ++r) {
    int64_t l = 0, h = 0;
    if (r < s.nq) visible_columns(s, kind, keys[r], l, h);
    lo[r] = static_cast<int32_t>(l);
    hi[r] = static_cast<int32_t>(h);
  }
}

// A (rows x cols) block of rows `stride` apart, as fp32 the tile products
// can read with plain vector loads and broadcasts: fp32 is read in place;
// bf16 and fp16 are widened once into `buffer` (exact), so the products'
// inner loops never convert. Sets `ld` to the stride of what it returns.
template <typename T>
HR_ATTENTION_INLINE const float* as_fp32_rows(const T* src, int64_t stride, int64_t rows,
                                              int64_t cols, float* buffer, int64_t& ld) {
  if constexpr (std::is_same_v<T, float>) {
    ld = stride;
    return src;
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; c += 8) {
        if (c + 8 <= cols) {
          store8(buffer + r * cols + c, load8(src + r * stride + c));
        } else {
          for (int64_t x = c; x < cols; ++x)
            buffer[r * cols + x] = widen(src[r * stride + x]);
        }
      }
    ld = cols;
    return buffer;
  }
}

// s (m x n) = A B^T for A's m rows and B's n rows of head_dim elements, both
// T (A's rows a_rs apart in memory): through VDPBF16PS against B packed in
// pairs (`b_pairs`, when p.dot), else in fp32 against B transposed (`b_t`,
// with A widened into `a_buffer` first when T is 16-bit). ldb is the packed
// or transposed B's row length, a multiple of 8. Returns the fp32 A it read
// (in place for fp32, a_buffer when widened; its stride in a_ld) for the
// caller's next product with the same tile, or nullptr on the dot route.
template <typename T>
HR_ATTENTION_INLINE const float* row_products(const Problem<T>& p, int64_t m, int64_t n, const T* a,
                                              int64_t a_rs, const uint32_t* b_pairs,
                                              const float* b_t, int64_t ldb, float* a_buffer,
                                              float* s, int64_t lds, int64_t& a_ld) {
  const int64_t dim = p.dims.head_dim;
  if constexpr (std::is_same_v<T, bf16>) {
    if (p.dot) {
      bf16_dot_tile(m, n, dim, a, a_rs, b_pairs, ldb, s, lds);
      a_ld = 0;
      return nullptr;
    }
  }
  const float* a32 = as_fp32_rows(a, a_rs, m, dim, a_buffer, a_ld);
  tile_product(p, m, n, dim, a32, a_ld, 1, b_t, ldb, s, lds, false);
  return a32;
}

// The right operand of row_products from `rows` rows of T: packed in pairs
// when p.dot, else transposed to fp32; ld is its row length.
template <typename T>
HR_ATTENTION_INLINE void prepare_right_operand(const Problem<T>& p, const T* src, int64_t stride,
                                               int64_t rows, int64_t ld, uint32_t* pairs,
                                               float* transposed) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (p.dot) {
      pack_bf16_pairs(src, stride, rows, p.dims.head_dim, pairs, ld);
      return;
    }
  }
  transpose_tile(src, stride, rows, p.dims.head_dim, transposed, ld);
}

// The dot route's right operand for products over a tile's rows: `rows`
// rows of T (a V, K, dO or Q tile) packed in pairs of rows, [ceil(rows/2)][D].
template <typename T>
HR_ATTENTION_INLINE void pack_row_pairs(const Problem<T>& p, const T* src, int64_t stride,
                                        int64_t rows, uint32_t* pairs) {
  if constexpr (std::is_same_v<T, bf16>)
    pack_bf16_row_pairs(src, stride, rows, p.dims.head_dim, pairs, p.dims.head_dim);
}

// The dot route's P V, dS K, P^T dO and dS^T Q: acc (m x D) += A B, where
// A = src^T rounded to bf16 (src holds k rows of at least m fp32, lds apart)
// and B is k rows packed by pack_row_pairs. An odd k meets a zero pair half
// on both sides.
HR_ATTENTION_INLINE void add_rounded_product(const float* src, int64_t lds, int64_t k, int64_t m,
                                             const uint32_t* b_pairs, int64_t dim, bf16* a_buffer,
                                             float* acc) {
  const int64_t k_even = (k + 1) / 2 * 2;
  round_transposed(src, lds, k, m, a_buffer, k_even);
  bf16_dot_tile(m, dim, k_even, a_buffer, k_even, b_pairs, dim, acc, dim, /*accumulate=*/true);
}

// ---- forward: one (head h, query tile i) ----
// Scores are computed keys-by-queries, s_t = K q^T, against q transposed once
// for the whole item, so the softmax runs over eight queries at a time and
// no tile is transposed per key tile.

template <typename T>
HR_ATTENTION_INLINE void forward_item(const Problem<T>& p, int64_t h, int64_t i) {
  const AttentionDims& d = p.dims;
  const int64_t dim = d.head_dim, g = h / d.group();
  float q_t[kMaxD * kMaxB];             // the query tile transposed, [D][ld]
  float acc[kMaxB * kMaxD];             // unnormalized output, [nq][D]
  float s_t[kMaxB * kMaxB];             // scores, then probabilities, [nk][ld]
  TileBuffer k_buffer;                  // fp32: the key tile widened; dot: P rounded, [nq][nk]
  TileBuffer v_buffer;                  // fp32: the value tile widened; dot: in pairs of rows
  uint32_t q_pairs[kMaxD / 2 * kMaxB];  // the query tile in pairs, [D/2][ld] (p.dot)
  float max[kMaxB], sum[kMaxB], rescale[kMaxB];
  KeyInterval keys[kMaxB];
  int32_t lo[kMaxB], hi[kMaxB];

  const TileSpan row = span_of(d, i, i);
  const int64_t ld = round_up8(row.nq);
  prepare_right_operand(p, p.q + row.q0 * p.q_stride + h * dim, p.q_stride, row.nq, ld, q_pairs,
                        q_t);
  for (int64_t r = 0; r < ld; ++r) {
    if (r < row.nq) keys[r] = visible_keys(d.mask, *p.cu_seqlens, row.q0 + r);
    max[r] = kMinusInfinity;
    sum[r] = 0.0f;
  }
  std::fill(acc, acc + row.nq * dim, 0.0f);

  const AttentionTilePlan& plan = *p.plan;
  for (int64_t j = plan.first_key_tile[i]; j <= plan.last_key_tile[i]; ++j) {
    const TileKind kind = plan.kind(i, j);
    const TileSpan t = span_of(d, i, j);
    const T* v_rows = p.v + t.k0 * p.kv_stride + g * dim;
    visible_columns(t, kind, keys, ld, lo, hi);
    int64_t k_ld;
    row_products(p, t.nk, ld, p.k + t.k0 * p.kv_stride + g * dim, p.kv_stride, q_pairs, q_t, ld,
                 k_buffer.fp32, s_t, ld, k_ld);
    softmax_update_by_columns(s_t, t.nk, ld, lo, hi, p.scale, max, sum, rescale, p.wide);
    for (int64_t r = 0; r < t.nq; ++r) {
      const float factor = rescale[r];
      if (factor == 1.0f) continue;
      float* acc_row = acc + r * dim;
#pragma omp simd
      for (int64_t c = 0; c < dim; ++c)
        acc_row[c] *= factor;
    }
    // acc += P v, with P read transposed out of s_t: A(r, c) = s_t[c][r].
    if (dot_route(p)) {
      pack_row_pairs(p, v_rows, p.kv_stride, t.nk, v_buffer.row_pairs);
      add_rounded_product(s_t, ld, t.nk, t.nq, v_buffer.row_pairs, dim, k_buffer.rounded, acc);
    } else {
      int64_t v_ld;
      const float* v = as_fp32_rows(v_rows, p.kv_stride, t.nk, dim, v_buffer.fp32, v_ld);
      tile_product(p, t.nq, dim, t.nk, s_t, 1, ld, v, v_ld, acc, dim, true);
    }
  }

  // Every row saw its own key (attention_mask.h), so its maximum's term is
  // exp(0) = 1: sum >= 1.
  for (int64_t r = 0; r < row.nq; ++r) {
    store_scaled_row(acc + r * dim, 1.0f / sum[r], dim,
                     p.out + (row.q0 + r) * p.q_stride + h * dim);
    p.lse[h * d.tokens + row.q0 + r] = max[r] + std::log(sum[r]);
  }
}

// ---- backward, pass 1: dq for one (head h, query tile i) ----
// Keys-by-queries like forward: q and dO are transposed once per item.

template <typename T>
HR_ATTENTION_INLINE void backward_dq_item(const Problem<T>& p, int64_t h, int64_t i) {
  const AttentionDims& d = p.dims;
  const int64_t dim = d.head_dim, g = h / d.group();
  float q_t[kMaxD * kMaxB];   // the query tile transposed, [D][ld]
  float do_t[kMaxD * kMaxB];  // its output gradient transposed, [D][ld]
  float acc[kMaxB * kMaxD];   // dq / scale, [nq][D]
  float s_t[kMaxB * kMaxB];   // scores, then dS, [nk][ld]
  float dp_t[kMaxB * kMaxB];  // V dO^T, [nk][ld]
  TileBuffer k_buffer;        // fp32: the key tile widened; dot: in pairs of rows
  TileBuffer v_buffer;        // fp32: the value tile widened; dot: dS rounded, [nq][nk]
  uint32_t q_pairs[kMaxD / 2 * kMaxB], do_pairs[kMaxD / 2 * kMaxB];  // [D/2][ld] (p.dot)
  float lse[kMaxB], delta[kMaxB];
  KeyInterval keys[kMaxB];
  int32_t lo[kMaxB], hi[kMaxB];

  const TileSpan row = span_of(d, i, i);
  const int64_t ld = round_up8(row.nq);
  prepare_right_operand(p, p.q + row.q0 * p.q_stride + h * dim, p.q_stride, row.nq, ld, q_pairs,
                        q_t);
  prepare_right_operand(p, p.d_out + row.q0 * p.q_stride + h * dim, p.q_stride, row.nq, ld,
                        do_pairs, do_t);
  for (int64_t r = 0; r < ld; ++r) {
    const bool real = r < row.nq;
    if (real) keys[r] = visible_keys(d.mask, *p.cu_seqlens, row.q0 + r);
    lse[r] = real ? p.lse[h * d.tokens + row.q0 + r] : 0.0f;
    delta[r] = real ? p.delta[h * d.tokens + row.q0 + r] : 0.0f;
  }
  std::fill(acc, acc + row.nq * dim, 0.0f);

  const AttentionTilePlan& plan = *p.plan;
  for (int64_t j = plan.first_key_tile[i]; j <= plan.last_key_tile[i]; ++j) {
    const TileKind kind = plan.kind(i, j);
    const TileSpan t = span_of(d, i, j);
    const T* k_rows = p.k + t.k0 * p.kv_stride + g * dim;
    visible_columns(t, kind, keys, ld, lo, hi);
    int64_t k_ld, v_ld;
    const float* k = row_products(p, t.nk, ld, k_rows, p.kv_stride, q_pairs, q_t, ld, k_buffer.fp32,
                                  s_t, ld, k_ld);
    row_products(p, t.nk, ld, p.v + t.k0 * p.kv_stride + g * dim, p.kv_stride, do_pairs, do_t, ld,
                 v_buffer.fp32, dp_t, ld, v_ld);
    score_gradients_by_columns(s_t, dp_t, t.nk, ld, lo, hi, p.scale, lse, delta, p.wide);
    // acc += dS k, with dS read transposed out of s_t.
    if (dot_route(p)) {
      pack_row_pairs(p, k_rows, p.kv_stride, t.nk, k_buffer.row_pairs);
      add_rounded_product(s_t, ld, t.nk, t.nq, k_buffer.row_pairs, dim, v_buffer.rounded, acc);
    } else {
      // k as row_products read it (widened once, or fp32 in place).
      tile_product(p, t.nq, dim, t.nk, s_t, 1, ld, k, k_ld, acc, dim, true);
    }
  }

  for (int64_t r = 0; r < row.nq; ++r)
    store_scaled_row(acc + r * dim, p.scale, dim, p.dq + (row.q0 + r) * p.q_stride + h * dim);
}

// ---- backward, pass 2: dk and dv for one (kv head g, key tile j) ----

template <typename T>
HR_ATTENTION_INLINE void backward_dkv_item(const Problem<T>& p, int64_t g, int64_t j) {
  const AttentionDims& d = p.dims;
  const int64_t dim = d.head_dim, ld = round_up8(d.block_size);
  TileBuffer k_t;           // fp32: the key tile transposed, [D][ld]; dot: P^T rounded
  TileBuffer v_t;           // fp32: the value tile transposed, [D][ld]; dot: dS^T rounded
  float dk[kMaxB * kMaxD];  // dk / scale, [nk][D]
  float dv[kMaxB * kMaxD];  // [nk][D]
  float s[kMaxB * kMaxB];   // scores, then P, then dS, [nq][ld]
  float dp[kMaxB * kMaxB];  // dO V^T, [nq][ld]
  TileBuffer q_buffer;      // fp32: the query tile widened; dot: in pairs of rows
  TileBuffer do_buffer;     // fp32: the dO tile widened; dot: in pairs of rows
  uint32_t k_pairs[kMaxD / 2 * kMaxB], v_pairs[kMaxD / 2 * kMaxB];  // [D/2][width] (p.dot)
  KeyInterval keys[kMaxB];

  const TileSpan column = span_of(d, j, j);
  const int64_t width = round_up8(column.nk);
  prepare_right_operand(p, p.k + column.k0 * p.kv_stride + g * dim, p.kv_stride, column.nk, width,
                        k_pairs, k_t.fp32);
  prepare_right_operand(p, p.v + column.k0 * p.kv_stride + g * dim, p.kv_stride, column.nk, width,
                        v_pairs, v_t.fp32);
  std::fill(dk, dk + column.nk * dim, 0.0f);
  std::fill(dv, dv + column.nk * dim, 0.0f);

  const AttentionTilePlan& plan = *p.plan;
  for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
    for (int64_t i = plan.first_query_tile[j]; i <= plan.last_query_tile[j]; ++i) {
      const TileKind kind = plan.kind(i, j);
      const TileSpan t = span_of(d, i, j);
      const T* q_rows = p.q + t.q0 * p.q_stride + h * dim;
      const T* do_rows = p.d_out + t.q0 * p.q_stride + h * dim;
      const float* lse = p.lse + h * d.tokens + t.q0;
      const float* delta = p.delta + h * d.tokens + t.q0;
      if (kind == TileKind::kPartial)
        for (int64_t r = 0; r < t.nq; ++r)
          keys[r] = visible_keys(d.mask, *p.cu_seqlens, t.q0 + r);
      int64_t q_ld, do_ld;
      const float* q = row_products(p, t.nq, width, q_rows, p.q_stride, k_pairs, k_t.fp32, width,
                                    q_buffer.fp32, s, ld, q_ld);
      const float* d_out = row_products(p, t.nq, width, do_rows, p.q_stride, v_pairs, v_t.fp32,
                                        width, do_buffer.fp32, dp, ld, do_ld);
      for (int64_t r = 0; r < t.nq; ++r) {
        int64_t lo, hi;
        visible_columns(t, kind, keys[r], lo, hi);
        probabilities_row(s + r * ld, width, lo, hi, p.scale, lse[r], p.wide);
      }
      if (dot_route(p)) {
        pack_row_pairs(p, do_rows, p.q_stride, t.nq, do_buffer.row_pairs);
        pack_row_pairs(p, q_rows, p.q_stride, t.nq, q_buffer.row_pairs);
        // dV += P^T dO, dK += dS^T Q.
        add_rounded_product(s, ld, t.nq, t.nk, do_buffer.row_pairs, dim, k_t.rounded, dv);
        for (int64_t r = 0; r < t.nq; ++r)
          score_gradients_row(s + r * ld, dp + r * ld, width, delta[r]);
        add_rounded_product(s, ld, t.nq, t.nk, q_buffer.row_pairs, dim, v_t.rounded, dk);
      } else {
        // q and dO as row_products read them (widened once, or fp32 in place).
        // dV += P^T dO: A(c, r) = P[r][c].
        tile_product(p, t.nk, dim, t.nq, s, 1, ld, d_out, do_ld, dv, dim, true);
        for (int64_t r = 0; r < t.nq; ++r)
          score_gradients_row(s + r * ld, dp + r * ld, width, delta[r]);
        // dK += dS^T Q.
        tile_product(p, t.nk, dim, t.nq, s, 1, ld, q, q_ld, dk, dim, true);
      }
    }
  }

  for (int64_t c = 0; c < column.nk; ++c) {
    const int64_t at = (column.k0 + c) * p.kv_stride + g * dim;
    store_scaled_row(dk + c * dim, p.scale, dim, p.dk + at);
    store_scaled_row(dv + c * dim, 1.0f, dim, p.dv + at);
  }
}

// D = rowsum(dO * O) for one token, every head.
template <typename T>
void backward_delta_row(const Problem<T>& p, const T* out, float* delta, int64_t t) {
  const int64_t dim = p.dims.head_dim;
  for (int64_t h = 0; h < p.dims.heads; ++h) {
    const T* o = out + t * p.q_stride + h * dim;
    const T* d_o = p.d_out + t * p.q_stride + h * dim;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < dim; ++c)
      sum += widen(o[c]) * widen(d_o[c]);
    delta[h * p.dims.tokens + t] = sum;
  }
}

// The work items, compiled three times where the toolchain can: for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA, what every machine this
// project runs on has) and the baseline, chosen once at load time by the
// CPU. The build's flags stay baseline so the binary runs anywhere; within
// one machine every item runs the same clone, so thread count never changes
// the bits. The v4 clone differs from v3 where GCC vectorizes a loop itself
// (stores, fills, conversions) and in the softmax pieces, which take 16
// lanes where the Problem says `wide` (attention_kernels.h), with the same
// operations per element either way: the losses are identical, and the
// items' own time roughly halved (bench/RESULTS.md, fourth pass).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HR_ATTENTION_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HR_ATTENTION_CLONES
#endif

HR_ATTENTION_CLONES void forward_item_f32(const Problem<float>& p, int64_t h, int64_t i) {
  forward_item(p, h, i);
}
HR_ATTENTION_CLONES void forward_item_bf16(const Problem<bf16>& p, int64_t h, int64_t i) {
  forward_item(p, h, i);
}
HR_ATTENTION_CLONES void backward_dq_item_f32(const Problem<float>& p, int64_t h, int64_t i) {
  backward_dq_item(p, h, i);
}
HR_ATTENTION_CLONES void backward_dq_item_bf16(const Problem<bf16>& p, int64_t h, int64_t i) {
  backward_dq_item(p, h, i);
}
HR_ATTENTION_CLONES void backward_dkv_item_f32(const Problem<float>& p, int64_t g, int64_t j) {
  backward_dkv_item(p, g, j);
}
HR_ATTENTION_CLONES void backward_dkv_item_bf16(const Problem<bf16>& p, int64_t g, int64_t j) {
  backward_dkv_item(p, g, j);
}
HR_ATTENTION_CLONES void forward_item_f16(const Problem<f16>& p, int64_t h, int64_t i) {
  forward_item(p, h, i);
}
HR_ATTENTION_CLONES void backward_dq_item_f16(const Problem<f16>& p, int64_t h, int64_t i) {
  backward_dq_item(p, h, i);
}
HR_ATTENTION_CLONES void backward_dkv_item_f16(const Problem<f16>& p, int64_t g, int64_t j) {
  backward_dkv_item(p, g, j);
}
void run_forward_item(const Problem<float>& p, int64_t h, int64_t i) {
  forward_item_f32(p, h, i);
}
void run_forward_item(const Problem<bf16>& p, int64_t h, int64_t i) {
  forward_item_bf16(p, h, i);
}
void run_backward_dq_item(const Problem<float>& p, int64_t h, int64_t i) {
  backward_dq_item_f32(p, h, i);
}
void run_backward_dq_item(const Problem<bf16>& p, int64_t h, int64_t i) {
  backward_dq_item_bf16(p, h, i);
}
void run_backward_dkv_item(const Problem<float>& p, int64_t g, int64_t j) {
  backward_dkv_item_f32(p, g, j);
}
void run_backward_dkv_item(const Problem<bf16>& p, int64_t g, int64_t j) {
  backward_dkv_item_bf16(p, g, j);
}
void run_forward_item(const Problem<f16>& p, int64_t h, int64_t i) {
  forward_item_f16(p, h, i);
}
void run_backward_dq_item(const Problem<f16>& p, int64_t h, int64_t i) {
  backward_dq_item_f16(p, h, i);
}
void run_backward_dkv_item(const Problem<f16>& p, int64_t g, int64_t j) {
  backward_dkv_item_f16(p, g, j);
}

// Multiply-adds of one tile pair for one head (the scores' and the
// output's), to decide whether forking threads pays.
double tile_work(const AttentionDims& d, const AttentionTilePlan& plan) {
  return static_cast<double>(plan.full + plan.partial) * static_cast<double>(d.heads) *
         static_cast<double>(d.block_size * d.block_size * d.head_dim) * 2.0;
}

// Items are numbered so the costliest come first (late query tiles see the
// most keys; early key tiles are seen by the most queries), which is what
// a dynamic schedule needs to end evenly.
template <typename T>
void forward(const Problem<T>& p) {
  const int64_t heads = p.dims.heads, tiles = p.dims.tiles(), items = heads * tiles;
  const bool parallel = tile_work(p.dims, *p.plan) >= kMinParallelWork;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t w = 0; w < items; ++w)
    run_forward_item(p, w % heads, tiles - 1 - w / heads);
}

template <typename T>
void backward(const Problem<T>& p, const T* out, float* delta) {
  const AttentionDims& d = p.dims;
  const int64_t tiles = d.tiles();
  const bool parallel = tile_work(d, *p.plan) >= kMinParallelWork;
#pragma omp parallel if (parallel)
  {
    // This loop's implicit barrier: every delta is written before an item reads it.
#pragma omp for schedule(static)
    for (int64_t t = 0; t < d.tokens; ++t)
      backward_delta_row(p, out, delta, t);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t w = 0; w < d.heads * tiles; ++w)
      run_backward_dq_item(p, w % d.heads, tiles - 1 - w / d.heads);
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < d.kv_heads * tiles; ++w)
      run_backward_dkv_item(p, w % d.kv_heads, w / d.kv_heads);
  }
}

}  // namespace

void CpuKernels::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const std::vector<int32_t>& cu_seqlens,
                                   const AttentionParams& params, const AttentionDims& dims,
                                   Tensor& out, Tensor& lse) {
  const AttentionTilePlan plan =
      attention_tile_plan(cu_seqlens, dims.tokens, dims.block_size, dims.mask);
  with_floating_type(q.dtype(), [&]<typename T>(T*) {
    Problem<T> p = make_problem<T>(dims, plan, cu_seqlens, params.scale, q, k, v);
    p.out = out.data<T>();
    p.lse = lse.data<float>();
    forward(p);
  });
}

void CpuKernels::attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& out, const Tensor& lse,
                                    const std::vector<int32_t>& cu_seqlens,
                                    const AttentionParams& params, const AttentionDims& dims,
                                    AttentionBackwardScratch& scratch, Tensor& dq, Tensor& dk,
                                    Tensor& dv) {
  const AttentionTilePlan plan =
      attention_tile_plan(cu_seqlens, dims.tokens, dims.block_size, dims.mask);
  auto run = [&]<typename T>(T*) {
    Problem<T> p = make_problem<T>(dims, plan, cu_seqlens, params.scale, q, k, v);
    p.lse = lse.data<float>();
    p.d_out = d_out.data<T>();
    p.delta = scratch.delta.data<float>();
    p.dq = dq.data<T>();
    p.dk = dk.data<T>();
    p.dv = dv.data<T>();
    backward(p, out.data<T>(), scratch.delta.data<float>());
  };
  with_floating_type(q.dtype(), run);
}

}  // namespace headroom
