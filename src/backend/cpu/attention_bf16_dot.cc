// VDPBF16PS tile products (see attention_bf16_dot.h). Only the functions
// below are compiled for AVX512-BF16; callers reach them after
// have_bf16_dot(), so the binary still runs on any x86-64.
#include "backend/cpu/attention_bf16_dot.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace headroom::attention_cpu {

bool have_bf16_dot() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool have = [] {
    // HEADROOM_CPU_BF16_DOT=0 keeps the fp32 tile products on a CPU that
    // has VDPBF16PS: what a CPU without it runs, testable and measurable here.
    const char* setting = std::getenv("HEADROOM_CPU_BF16_DOT");
    if (setting != nullptr && std::string_view(setting) == "0") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
  }();
  return have;
#else
  return false;
#endif
}

void pack_bf16_pairs(const bf16* src, int64_t stride, int64_t rows, int64_t cols, uint32_t* dst,
                     int64_t ld) {
  const int64_t pairs = cols / 2;
  for (int64_t c = 0; c < rows; ++c) {
    const bf16* row = src + c * stride;
    for (int64_t p = 0; p < pairs; ++p) {
      uint32_t word;
      std::memcpy(&word, row + 2 * p, sizeof word);  // little-endian: 2p low, 2p + 1 high
      dst[p * ld + c] = word;
    }
  }
  for (int64_t p = 0; p < pairs; ++p)
    for (int64_t c = rows; c < ld; ++c)
      dst[p * ld + c] = 0;
}

#if defined(__x86_64__) && defined(__GNUC__)

#define HR_BF16_DOT_TARGET __attribute__((target("avx512bf16,avx512vl,avx512bw,avx512f,avx2,fma")))

namespace {

HR_BF16_DOT_TARGET inline __m256bh load_pairs(const uint32_t* p) {
  return reinterpret_cast<__m256bh>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
HR_BF16_DOT_TARGET inline __m256bh broadcast_pair(const bf16* p) {
  int32_t word;
  std::memcpy(&word, p, sizeof word);
  return reinterpret_cast<__m256bh>(_mm256_set1_epi32(word));
}

// kRows rows of C, every column block of 16 then of 8 (n is a multiple of 8).
template <int kRows>
HR_BF16_DOT_TARGET inline void dot_rows(int64_t n, int64_t pairs, const bf16* a, int64_t a_rs,
                                        const uint32_t* b, int64_t ldb, float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 acc[kRows][2];
    for (int r = 0; r < kRows; ++r)
      acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const __m256bh b0 = load_pairs(b + p * ldb + j), b1 = load_pairs(b + p * ldb + j + 8);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const __m256bh x = broadcast_pair(a + r * a_rs + 2 * p);
        acc[r][0] = _mm256_dpbf16_ps(acc[r][0], x, b0);
        acc[r][1] = _mm256_dpbf16_ps(acc[r][1], x, b1);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      _mm256_storeu_ps(c + r * ldc + j, acc[r][0]);
      _mm256_storeu_ps(c + r * ldc + j + 8, acc[r][1]);
    }
  }
  for (; j < n; j += 8) {
    __m256 acc[kRows];
    for (int r = 0; r < kRows; ++r)
      acc[r] = _mm256_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const __m256bh b0 = load_pairs(b + p * ldb + j);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r)
        acc[r] = _mm256_dpbf16_ps(acc[r], broadcast_pair(a + r * a_rs + 2 * p), b0);
    }
    for (int r = 0; r < kRows; ++r)
      _mm256_storeu_ps(c + r * ldc + j, acc[r]);
  }
}

}  // namespace

HR_BF16_DOT_TARGET void bf16_dot_tile(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t a_rs,
                                      const uint32_t* b, int64_t ldb, float* c, int64_t ldc) {
  const int64_t pairs = k / 2;
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    dot_rows<4>(n, pairs, a + i * a_rs, a_rs, b, ldb, c + i * ldc, ldc);
  const bf16* a_tail = a + i * a_rs;
  float* c_tail = c + i * ldc;
  switch (m - i) {
    case 3:
      dot_rows<3>(n, pairs, a_tail, a_rs, b, ldb, c_tail, ldc);
      break;
    case 2:
      dot_rows<2>(n, pairs, a_tail, a_rs, b, ldb, c_tail, ldc);
      break;
    case 1:
      dot_rows<1>(n, pairs, a_tail, a_rs, b, ldb, c_tail, ldc);
      break;
    default:
      break;
  }
}

#else

void bf16_dot_tile(int64_t, int64_t, int64_t, const bf16*, int64_t, const uint32_t*, int64_t,
                   float*, int64_t) {}

#endif

}  // namespace headroom::attention_cpu
