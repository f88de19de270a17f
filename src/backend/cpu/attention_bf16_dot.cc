// VDPBF16PS tile products (see attention_bf16_dot.h). Only the functions
// below are compiled for AVX512-BF16; callers reach them after
// have_bf16_dot(), so the binary still runs on any x86-64.
#include "backend/cpu/attention_bf16_dot.h"

#include <immintrin.h>

#include <cstring>

#include "backend/cpu/cpu_switch.h"

namespace headroom::attention_cpu {

bool have_bf16_dot() {
#if defined(__x86_64__) && defined(__GNUC__) && !HEADROOM_CPU_AVX2_ONLY
  static const bool have = [] {
    // HEADROOM_CPU_BF16_DOT=0 keeps the fp32 tile products on a CPU that
    // has VDPBF16PS.
    if (cpu_path_switched_off("HEADROOM_CPU_BF16_DOT")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
  }();
  return have;
#else
  return false;
#endif
}

namespace {

// The packings word by word: the tails of the vector versions, and all of it
// where there are none.
void pack_pairs_scalar(const bf16* src, int64_t stride, int64_t r0, int64_t r1, int64_t p0,
                       int64_t p1, uint32_t* dst, int64_t ld) {
  for (int64_t c = r0; c < r1; ++c)
    for (int64_t p = p0; p < p1; ++p) {
      uint32_t word;
      std::memcpy(&word, src + c * stride + 2 * p, sizeof word);  // 2p low, 2p + 1 high
      dst[p * ld + c] = word;
    }
}

void zero_pair_padding(int64_t rows, int64_t pairs, uint32_t* dst, int64_t ld) {
  for (int64_t p = 0; p < pairs; ++p)
    for (int64_t c = rows; c < ld; ++c)
      dst[p * ld + c] = 0;
}

void pack_row_pairs_scalar(const bf16* even, const bf16* odd, int64_t x0, int64_t cols,
                           uint32_t* out) {
  for (int64_t x = x0; x < cols; ++x)
    out[x] = uint32_t{even[x].bits} | (odd != nullptr ? uint32_t{odd[x].bits} << 16 : 0u);
}

}  // namespace

namespace {

// round_transposed element by element: the tails of the vector version, and
// all of it where there is none.
void round_transposed_scalar(const float* src, int64_t lds, int64_t r0, int64_t r1, int64_t c0,
                             int64_t c1, bf16* dst, int64_t ldd) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      dst[c * ldd + r] = to_bf16(src[r * lds + c]);
}

void zero_odd_row_padding(int64_t rows, int64_t cols, bf16* dst, int64_t ldd) {
  if (rows % 2 == 0) return;
  for (int64_t c = 0; c < cols; ++c)
    dst[c * ldd + rows] = bf16{0};
}

}  // namespace

#if defined(__x86_64__) && defined(__GNUC__)

#define HR_BF16_DOT_TARGET __attribute__((target("avx512bf16,avx512vl,avx512bw,avx512f,avx2,fma")))

namespace {

HR_BF16_DOT_TARGET inline __m256bh load_pairs(const uint32_t* p, __mmask8 lanes) {
  return reinterpret_cast<__m256bh>(_mm256_maskz_loadu_epi32(lanes, p));
}
HR_BF16_DOT_TARGET inline __m256bh load_pairs(const uint32_t* p) {
  return reinterpret_cast<__m256bh>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
HR_BF16_DOT_TARGET inline __m256bh broadcast_pair(const bf16* p) {
  int32_t word;
  std::memcpy(&word, p, sizeof word);
  return reinterpret_cast<__m256bh>(_mm256_set1_epi32(word));
}

// VDPBF16PS and what goes with it at one vector width: Ymm 8 fp32 lanes
// (16 bf16), Zmm 16 (32), for dot_block.
struct Ymm {
  static constexpr int64_t kLanes = 8;
  using Acc = __m256;
  using Pairs = __m256bh;
  HR_BF16_DOT_TARGET static Acc zero() { return _mm256_setzero_ps(); }
  HR_BF16_DOT_TARGET static Acc load(const float* p) { return _mm256_loadu_ps(p); }
  HR_BF16_DOT_TARGET static void store(float* p, Acc v) { _mm256_storeu_ps(p, v); }
  HR_BF16_DOT_TARGET static Pairs pairs(const uint32_t* p) { return load_pairs(p); }
  HR_BF16_DOT_TARGET static Pairs broadcast(const bf16* p) { return broadcast_pair(p); }
  HR_BF16_DOT_TARGET static Acc dot(Acc acc, Pairs x, Pairs y) {
    return _mm256_dpbf16_ps(acc, x, y);
  }
};
struct Zmm {
  static constexpr int64_t kLanes = 16;
  using Acc = __m512;
  using Pairs = __m512bh;
  HR_BF16_DOT_TARGET static Acc zero() { return _mm512_setzero_ps(); }
  HR_BF16_DOT_TARGET static Acc load(const float* p) { return _mm512_loadu_ps(p); }
  HR_BF16_DOT_TARGET static void store(float* p, Acc v) { _mm512_storeu_ps(p, v); }
  HR_BF16_DOT_TARGET static Pairs pairs(const uint32_t* p) {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
  }
  HR_BF16_DOT_TARGET static Pairs broadcast(const bf16* p) {
    int32_t word;
    std::memcpy(&word, p, sizeof word);
    return reinterpret_cast<__m512bh>(_mm512_set1_epi32(word));
  }
  HR_BF16_DOT_TARGET static Acc dot(Acc acc, Pairs x, Pairs y) {
    return _mm512_dpbf16_ps(acc, x, y);
  }
};

// Columns [j, j + 2 * W::kLanes) of kRows rows of C: 2 * kRows accumulators,
// two B loads and kRows broadcasts per pair.
template <typename W, int kRows>
HR_BF16_DOT_TARGET inline void dot_block(int64_t j, int64_t pairs, const bf16* a, int64_t a_rs,
                                         const uint32_t* b, int64_t ldb, float* c, int64_t ldc,
                                         bool accumulate) {
  typename W::Acc acc[kRows][2];
  for (int r = 0; r < kRows; ++r) {
    acc[r][0] = accumulate ? W::load(c + r * ldc + j) : W::zero();
    acc[r][1] = accumulate ? W::load(c + r * ldc + j + W::kLanes) : W::zero();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const typename W::Pairs b0 = W::pairs(b + p * ldb + j),
                            b1 = W::pairs(b + p * ldb + j + W::kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const typename W::Pairs x = W::broadcast(a + r * a_rs + 2 * p);
      acc[r][0] = W::dot(acc[r][0], x, b0);
      acc[r][1] = W::dot(acc[r][1], x, b1);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    W::store(c + r * ldc + j, acc[r][0]);
    W::store(c + r * ldc + j + W::kLanes, acc[r][1]);
  }
}

// kRows rows of C, every column block of 32 (512-bit vectors), then of 16,
// then of 8 or fewer (masked: nothing at or past n is touched). A lane of
// VDPBF16PS computes the same thing at any vector width, and each C element
// is one sequence of them over the pairs, so the blocking never changes a
// bit; 512-bit vectors double the products per instruction, which CPUs with
// full-width AVX-512 units (Zen 5, Sapphire Rapids) run at the same rate.
template <int kRows>
HR_BF16_DOT_TARGET inline void dot_rows(int64_t n, int64_t pairs, const bf16* a, int64_t a_rs,
                                        const uint32_t* b, int64_t ldb, float* c, int64_t ldc,
                                        bool accumulate) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32)
    dot_block<Zmm, kRows>(j, pairs, a, a_rs, b, ldb, c, ldc, accumulate);
  for (; j + 16 <= n; j += 16)
    dot_block<Ymm, kRows>(j, pairs, a, a_rs, b, ldb, c, ldc, accumulate);
  for (; j < n; j += 8) {
    const __mmask8 lanes = n - j >= 8 ? __mmask8{0xff} : static_cast<__mmask8>((1u << (n - j)) - 1);
    __m256 acc[kRows];
    for (int r = 0; r < kRows; ++r)
      acc[r] = accumulate ? _mm256_maskz_loadu_ps(lanes, c + r * ldc + j) : _mm256_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const __m256bh b0 = load_pairs(b + p * ldb + j, lanes);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r)
        acc[r] = _mm256_dpbf16_ps(acc[r], broadcast_pair(a + r * a_rs + 2 * p), b0);
    }
    for (int r = 0; r < kRows; ++r)
      _mm256_mask_storeu_ps(c + r * ldc + j, lanes, acc[r]);
  }
}

// 8 x 8 block at (r0, c0): eight rows of eight fp32 rounded (VCVTNEPS2BF16:
// nearest even), then transposed as 16-bit lanes in three rounds of unpacks.
HR_BF16_DOT_TARGET inline void round_transposed_8x8(const float* src, int64_t lds, bf16* dst,
                                                    int64_t ldd) {
  __m128i x[8];
  for (int i = 0; i < 8; ++i)
    x[i] = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(_mm256_loadu_ps(src + i * lds)));
  __m128i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm_unpacklo_epi16(x[2 * i], x[2 * i + 1]);      // rows 2i, 2i+1: columns 0-3
    t[2 * i + 1] = _mm_unpackhi_epi16(x[2 * i], x[2 * i + 1]);  // columns 4-7
  }
  for (int half = 0; half < 2; ++half) {  // rows 0-3, then rows 4-7
    const __m128i* v = t + 4 * half;
    __m128i* w = u + 4 * half;
    w[0] = _mm_unpacklo_epi32(v[0], v[2]);  // columns 0, 1
    w[1] = _mm_unpackhi_epi32(v[0], v[2]);  // columns 2, 3
    w[2] = _mm_unpacklo_epi32(v[1], v[3]);  // columns 4, 5
    w[3] = _mm_unpackhi_epi32(v[1], v[3]);  // columns 6, 7
  }
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * i) * ldd),
                     _mm_unpacklo_epi64(u[i], u[4 + i]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * i + 1) * ldd),
                     _mm_unpackhi_epi64(u[i], u[4 + i]));
  }
}

}  // namespace

HR_BF16_DOT_TARGET void pack_bf16_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols,
                                        uint32_t* dst, int64_t ld) {
  const int64_t pairs = cols / 2, full_rows = rows / 8 * 8, full_pairs = pairs / 8 * 8;
  // 8 rows x 8 pairs at a time: a transpose of 32-bit words in registers.
  for (int64_t c = 0; c < full_rows; c += 8)
    for (int64_t p = 0; p < full_pairs; p += 8) {
      __m256i r[8], t[8], u[8];
      for (int i = 0; i < 8; ++i)
        r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (c + i) * stride + 2 * p));
      for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);      // pairs 0 1 | 4 5
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);  // pairs 2 3 | 6 7
      }
      for (int half = 0; half < 2; ++half) {  // rows 0-3, then 4-7
        const __m256i* v = t + 4 * half;
        __m256i* w = u + 4 * half;
        w[0] = _mm256_unpacklo_epi64(v[0], v[2]);  // pair 0 | 4
        w[1] = _mm256_unpackhi_epi64(v[0], v[2]);  // pair 1 | 5
        w[2] = _mm256_unpacklo_epi64(v[1], v[3]);  // pair 2 | 6
        w[3] = _mm256_unpackhi_epi64(v[1], v[3]);  // pair 3 | 7
      }
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (p + i) * ld + c),
                            _mm256_permute2x128_si256(u[i], u[4 + i], 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (p + i + 4) * ld + c),
                            _mm256_permute2x128_si256(u[i], u[4 + i], 0x31));
      }
    }
  pack_pairs_scalar(src, stride, 0, full_rows, full_pairs, pairs, dst, ld);
  pack_pairs_scalar(src, stride, full_rows, rows, 0, pairs, dst, ld);
  zero_pair_padding(rows, pairs, dst, ld);
}

HR_BF16_DOT_TARGET void pack_bf16_row_pairs(const bf16* src, int64_t stride, int64_t rows,
                                            int64_t cols, uint32_t* dst, int64_t ld) {
  for (int64_t p = 0; 2 * p < rows; ++p) {
    const bf16* even = src + 2 * p * stride;
    const bf16* odd = 2 * p + 1 < rows ? even + stride : nullptr;
    uint32_t* out = dst + p * ld;
    int64_t x = 0;
    for (; x + 8 <= cols; x += 8) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + x));
      const __m128i b = odd != nullptr ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd + x))
                                       : _mm_setzero_si128();
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), _mm_unpacklo_epi16(a, b));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x + 4), _mm_unpackhi_epi16(a, b));
    }
    pack_row_pairs_scalar(even, odd, x, cols, out);
  }
}

HR_BF16_DOT_TARGET void round_transposed(const float* src, int64_t lds, int64_t rows, int64_t cols,
                                         bf16* dst, int64_t ldd) {
  const int64_t full_rows = rows / 8 * 8, full_cols = cols / 8 * 8;
  for (int64_t c = 0; c < full_cols; c += 8)
    for (int64_t r = 0; r < full_rows; r += 8)
      round_transposed_8x8(src + r * lds + c, lds, dst + c * ldd + r, ldd);
  round_transposed_scalar(src, lds, full_rows, rows, 0, full_cols, dst, ldd);
  round_transposed_scalar(src, lds, 0, rows, full_cols, cols, dst, ldd);
  zero_odd_row_padding(rows, cols, dst, ldd);
}

HR_BF16_DOT_TARGET void bf16_dot_tile(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t a_rs,
                                      const uint32_t* b, int64_t ldb, float* c, int64_t ldc,
                                      bool accumulate) {
  const int64_t pairs = k / 2;
  int64_t i = 0;
  // Eight rows at a time: 16 accumulators, enough independent VDPBF16PS
  // chains to cover the instruction's latency at two per cycle (four rows'
  // eight left Zen 5 waiting on them). Row blocking changes no bit.
  for (; i + 8 <= m; i += 8)
    dot_rows<8>(n, pairs, a + i * a_rs, a_rs, b, ldb, c + i * ldc, ldc, accumulate);
  for (; i + 4 <= m; i += 4)
    dot_rows<4>(n, pairs, a + i * a_rs, a_rs, b, ldb, c + i * ldc, ldc, accumulate);
  const bf16* a_tail = a + i * a_rs;
  float* c_tail = c + i * ldc;
  switch (m - i) {
    case 3:
      dot_rows<3>(n, pairs, a_tail, a_rs, b, ldb, c_tail, ldc, accumulate);
      break;
    case 2:
      dot_rows<2>(n, pairs, a_tail, a_rs, b, ldb, c_tail, ldc, accumulate);
      break;
    case 1:
      dot_rows<1>(n, pairs, a_tail, a_rs, b, ldb, c_tail, ldc, accumulate);
      break;
    default:
      break;
  }
}

#else

void pack_bf16_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols, uint32_t* dst,
                     int64_t ld) {
  pack_pairs_scalar(src, stride, 0, rows, 0, cols / 2, dst, ld);
  zero_pair_padding(rows, cols / 2, dst, ld);
}

void pack_bf16_row_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols, uint32_t* dst,
                         int64_t ld) {
  for (int64_t p = 0; 2 * p < rows; ++p)
    pack_row_pairs_scalar(src + 2 * p * stride,
                          2 * p + 1 < rows ? src + (2 * p + 1) * stride : nullptr, 0, cols,
                          dst + p * ld);
}

void round_transposed(const float* src, int64_t lds, int64_t rows, int64_t cols, bf16* dst,
                      int64_t ldd) {
  round_transposed_scalar(src, lds, 0, rows, 0, cols, dst, ldd);
  zero_odd_row_padding(rows, cols, dst, ldd);
}

void bf16_dot_tile(int64_t, int64_t, int64_t, const bf16*, int64_t, const uint32_t*, int64_t,
                   float*, int64_t, bool) {}

#endif

}  // namespace headroom::attention_cpu
