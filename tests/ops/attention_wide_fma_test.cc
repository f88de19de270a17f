// The 16-lane fp32 tile products of cpu attention (cpu/attention_wide_fma.h)
// against the 8-lane ones as the AVX2 clone compiles them: the same bits, for
// every shape the attention items ask for (row and column tails, transposed
// A, accumulating or not, k = 0); and against a float64 sum. In an optimized
// build each step is an FMA (GCC contracts a * b + c there) and the test
// checks a sequential std::fma sum to the bit too; at -O1 (the sanitizer
// build) GCC contracts nothing, in both widths alike.
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

// Whether this build contracts a * b + c into an FMA (the optimized ones do;
// -O1 does not), seen through the AVX2-compiled product of one term.
bool contracts() {
  // a * a = 1 + 2^-11 + 2^-24 needs 25 bits: rounded, minus c gives 0;
  // fused, 2^-24.
  const float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
  float out = c;
  tile_gemm_avx2(1, 1, 1, &a, 1, 1, &a, 1, &out, 1, true);
  return out != 0.0f;
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
  const bool contracted = contracts();
  RecordProperty("fma_contracted", contracted ? "yes" : "no");
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
                ASSERT_EQ(std::memcmp(&wide[at], &narrow[at], sizeof(float)), 0)
                    << "m " << m << " n " << n << " k " << k << " transposed " << transposed
                    << " accumulate " << accumulate << " at (" << r << ", " << j << "): 16 lanes "
                    << wide[at] << ", 8 lanes " << narrow[at];
                if (j >= n) {  // columns past n are untouched
                  ASSERT_EQ(std::memcmp(&wide[at], &c0[at], sizeof(float)), 0);
                  continue;
                }
                float fused = accumulate ? c0[at] : 0.0f;
                double sum = fused, magnitude = std::fabs(sum);
                for (int64_t p = 0; p < k; ++p) {
                  const float x = a[static_cast<size_t>(r * a_rs + p * a_cs)];
                  const float y = b[static_cast<size_t>(p * ldb + j)];
                  fused = std::fma(x, y, fused);
                  sum += static_cast<double>(x) * static_cast<double>(y);
                  magnitude += std::fabs(static_cast<double>(x) * static_cast<double>(y));
                }
                // k fp32 steps of up to two roundings each, of at most half an
                // ulp of the running sum, bounded by the magnitudes.
                EXPECT_NEAR(wide[at], sum, static_cast<double>(k) * 0x1p-23 * magnitude + 1e-30);
                if (contracted) {
                  ASSERT_EQ(std::memcmp(&wide[at], &fused, sizeof(float)), 0)
                      << "not a sequential FMA at (" << r << ", " << j << ")";
                }
              }
          }
}

}  // namespace
}  // namespace headroom::attention_cpu
