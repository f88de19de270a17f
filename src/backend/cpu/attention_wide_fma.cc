// 16-lane fp32 tile products (see attention_wide_fma.h). Only tile_gemm_wide
// is compiled for x86-64-v4; the helpers it inlines are generic.
#include "backend/cpu/attention_wide_fma.h"

#include <cstdlib>
#include <string_view>

#include "backend/cpu/attention_kernels.h"

// v16f values are passed between always-inlined helpers only (see
// attention_kernels.h): no call with the differing ABI exists.
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HR_WIDE_FMA_TARGET __attribute__((target("arch=x86-64-v4")))
#define HR_HAVE_WIDE_FMA_TARGET 1
#else
#define HR_WIDE_FMA_TARGET
#define HR_HAVE_WIDE_FMA_TARGET 0
#endif

namespace headroom::attention_cpu {

bool have_wide_fma() {
#if HR_HAVE_WIDE_FMA_TARGET
  static const bool have = [] {
    // HEADROOM_CPU_WIDE_FMA=0 keeps the 8-lane products on a CPU with
    // AVX-512: what an AVX2 CPU runs, testable and measurable here.
    const char* setting = std::getenv("HEADROOM_CPU_WIDE_FMA");
    if (setting != nullptr && std::string_view(setting) == "0") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v4") != 0;
  }();
  return have;
#else
  return false;
#endif
}

namespace {

using v16f = float __attribute__((vector_size(16 * sizeof(float))));

HR_ATTENTION_INLINE v16f load16(const float* p) {
  v16f v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
HR_ATTENTION_INLINE void store16(float* p, const v16f& v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// gemm_rows (attention_kernels.h) on 16 lanes: 32 columns x kRows rows at a
// time (2 * kRows accumulators, two B loads and kRows broadcasts per step of
// p, as there with 16 columns), then 16; the last < 16 columns go to
// gemm_rows itself. Each C element is one sequential sum over p wherever its
// column falls, so the blocking never changes a bit.
template <int kRows>
HR_ATTENTION_INLINE void gemm_rows_wide(int64_t n, int64_t k, const float* a, int64_t a_rs,
                                        int64_t a_cs, const float* b, int64_t ldb, float* c,
                                        int64_t ldc, bool accumulate) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    v16f acc[kRows][2];
    for (int r = 0; r < kRows; ++r) {
      acc[r][0] = accumulate ? load16(c + r * ldc + j) : v16f{};
      acc[r][1] = accumulate ? load16(c + r * ldc + j + 16) : v16f{};
    }
    for (int64_t p = 0; p < k; ++p) {
      const v16f b0 = load16(b + p * ldb + j), b1 = load16(b + p * ldb + j + 16);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const float x = a[r * a_rs + p * a_cs];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
    for (int r = 0; r < kRows; ++r) {
      store16(c + r * ldc + j, acc[r][0]);
      store16(c + r * ldc + j + 16, acc[r][1]);
    }
  }
  for (; j + 16 <= n; j += 16) {
    v16f acc[kRows];
    for (int r = 0; r < kRows; ++r)
      acc[r] = accumulate ? load16(c + r * ldc + j) : v16f{};
    for (int64_t p = 0; p < k; ++p) {
      const v16f b0 = load16(b + p * ldb + j);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r)
        acc[r] += a[r * a_rs + p * a_cs] * b0;
    }
    for (int r = 0; r < kRows; ++r)
      store16(c + r * ldc + j, acc[r]);
  }
  if (j < n) gemm_rows<kRows>(n - j, k, a, a_rs, a_cs, b + j, ldb, c + j, ldc, accumulate);
}

}  // namespace

HR_WIDE_FMA_TARGET void tile_gemm_wide(int64_t m, int64_t n, int64_t k, const float* a,
                                       int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                                       float* c, int64_t ldc, bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    gemm_rows_wide<4>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
  const float* a_tail = a + i * a_rs;
  float* c_tail = c + i * ldc;
  switch (m - i) {
    case 3:
      gemm_rows_wide<3>(n, k, a_tail, a_rs, a_cs, b, ldb, c_tail, ldc, accumulate);
      break;
    case 2:
      gemm_rows_wide<2>(n, k, a_tail, a_rs, a_cs, b, ldb, c_tail, ldc, accumulate);
      break;
    case 1:
      gemm_rows_wide<1>(n, k, a_tail, a_rs, a_cs, b, ldb, c_tail, ldc, accumulate);
      break;
    default:
      break;
  }
}

}  // namespace headroom::attention_cpu
