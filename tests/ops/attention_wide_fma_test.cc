// The 16-lane fp32 tile products of cpu attention (cpu/attention_wide_fma.h)
// against the 8-lane ones as the AVX2 clone compiles them and against a
// sequential std::fma sum per element: the same bits, for every shape the
// attention items ask for (row and column tails, transposed A, accumulating
// or not, k = 0).
#include "backend/cpu/attention_wide_fma.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_kernels.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace headroom::attention_cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HR_TEST_AVX2_TARGET __attribute__((target("arch=x86-64-v3")))
#else
#define HR_TEST_AVX2_TARGET
#endif

// tile_gemm compiled as attention.cc's AVX2 clone compiles it (8 lanes, FMA).
HR_TEST_AVX2_TARGET void tile_gemm_avx2(int64_t m, int64_t n, int64_t k, const float* a,
                                        int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                                        float* c, int64_t ldc, bool accumulate) {
  tile_gemm(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values)
    v = normal(rng);
  return values;
}

TEST(WideFma, TileProductsHaveTheBitsOfTheEightLaneOnesAndOfSequentialFmas) {
  if (!have_wide_fma()) GTEST_SKIP() << "this CPU has no AVX-512 (or HEADROOM_CPU_WIDE_FMA=0)";
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP();
  uint32_t seed = 1;
  for (int64_t m : {1, 3, 4, 5, 13, 64})
    for (int64_t n : {1, 8, 15, 16, 17, 31, 32, 33, 48, 64, 70, 128})
      for (int64_t k : {0, 1, 7, 64})
        for (bool transposed : {false, true})
          for (bool accumulate : {false, true}) {
            // A is m x k, stored row-major or (transposed) as k x m; B's rows
            // are ldb apart, C's ldc, both wider than n.
            const int64_t a_rs = transposed ? 1 : k + 3, a_cs = transposed ? m + 2 : 1;
            const int64_t ldb = n + 5, ldc = n + 7;
            const std::vector<float> a =
                random_floats(static_cast<size_t>((k + 3) * (m + 2)), ++seed);
            const std::vector<float> b =
                random_floats(static_cast<size_t>(std::max<int64_t>(k, 1) * ldb), ++seed);
            const std::vector<float> c0 = random_floats(static_cast<size_t>(m * ldc), ++seed);
            std::vector<float> wide = c0, narrow = c0;
            tile_gemm_wide(m, n, k, a.data(), a_rs, a_cs, b.data(), ldb, wide.data(), ldc,
                           accumulate);
            tile_gemm_avx2(m, n, k, a.data(), a_rs, a_cs, b.data(), ldb, narrow.data(), ldc,
                           accumulate);
            for (int64_t r = 0; r < m; ++r)
              for (int64_t j = 0; j < ldc; ++j) {
                const size_t at = static_cast<size_t>(r * ldc + j);
                float expected = c0[at];  // columns past n are untouched
                if (j < n) {
                  expected = accumulate ? c0[at] : 0.0f;
                  for (int64_t p = 0; p < k; ++p)
                    expected = std::fma(a[static_cast<size_t>(r * a_rs + p * a_cs)],
                                        b[static_cast<size_t>(p * ldb + j)], expected);
                }
                ASSERT_EQ(std::memcmp(&wide[at], &expected, sizeof(float)), 0)
                    << "wide m " << m << " n " << n << " k " << k << " transposed " << transposed
                    << " accumulate " << accumulate << " at (" << r << ", " << j
                    << "): " << wide[at] << " vs " << expected;
                ASSERT_EQ(std::memcmp(&narrow[at], &expected, sizeof(float)), 0)
                    << "8 lanes m " << m << " n " << n << " k " << k << " at (" << r << ", " << j
                    << ")";
              }
          }
}

}  // namespace
}  // namespace headroom::attention_cpu
