// The VDPBF16PS tile products of cpu attention (cpu/attention_bf16_dot.h):
// the pair packing to the word, and products of every shape the attention
// items ask for against a float64 sum of the same bf16 values.
#include "backend/cpu/attention_bf16_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace headroom::attention_cpu {
namespace {

std::vector<bf16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bf16> values(static_cast<size_t>(n));
  for (bf16& v : values)
    v = to_bf16(normal(rng));
  return values;
}

TEST(Bf16Pairs, PackInterleavesEachRowsPairsAndZeroesThePadding) {
  const int64_t rows = 3, cols = 4, stride = 6, ld = 8;
  std::vector<bf16> src(static_cast<size_t>(rows * stride));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = bf16{static_cast<uint16_t>(0x100 + i)};
  std::vector<uint32_t> dst(static_cast<size_t>(cols / 2 * ld), 0xdeadbeefu);
  pack_bf16_pairs(src.data(), stride, rows, cols, dst.data(), ld);
  for (int64_t p = 0; p < cols / 2; ++p)
    for (int64_t c = 0; c < ld; ++c) {
      const uint32_t expected =
          c < rows ? (uint32_t{src[static_cast<size_t>(c * stride + 2 * p)].bits} |
                      uint32_t{src[static_cast<size_t>(c * stride + 2 * p + 1)].bits} << 16)
                   : 0u;
      EXPECT_EQ(dst[static_cast<size_t>(p * ld + c)], expected) << "pair " << p << " column " << c;
    }
}

// C = A B^T for A (m x k) and B (n x k), rows of B packed; every shape of
// tail: rows 1..7 (the 4-row blocks and 3, 2, 1 left), columns 8..40.
TEST(Bf16DotTile, MatchesAFloat64SumOfTheSameBf16Values) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t m : {1, 2, 3, 4, 5, 7})
    for (int64_t n : {8, 16, 24, 40})
      for (int64_t k : {2, 8, 64}) {
        const int64_t a_rs = k + 6, b_rows = n - 3, ldc = n + 8;
        const std::vector<bf16> a = random_bf16(m * a_rs, 1);
        const std::vector<bf16> b = random_bf16(b_rows * k, 2);
        std::vector<uint32_t> packed(static_cast<size_t>(k / 2 * n));
        pack_bf16_pairs(b.data(), k, b_rows, k, packed.data(), n);
        std::vector<float> c(static_cast<size_t>(m * ldc), -1.0f);
        bf16_dot_tile(m, n, k, a.data(), a_rs, packed.data(), n, c.data(), ldc);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0, magnitude = 0;
            for (int64_t p = 0; p < k && j < b_rows; ++p) {
              const double term =
                  static_cast<double>(to_float(a[static_cast<size_t>(r * a_rs + p)])) *
                  static_cast<double>(to_float(b[static_cast<size_t>(j * k + p)]));
              sum += term;
              magnitude += std::fabs(term);
            }
            // fp32 accumulation of k exact products: k roundings of at most
            // half an ulp of the running sum, bounded by the magnitudes.
            const double bound = static_cast<double>(k) * 0x1p-24 * magnitude + 1e-30;
            EXPECT_NEAR(c[static_cast<size_t>(r * ldc + j)], sum, bound)
                << "m " << m << " n " << n << " k " << k << " at (" << r << ", " << j << ")";
          }
        for (int64_t r = 0; r < m; ++r)
          for (int64_t j = n; j < ldc; ++j)
            EXPECT_EQ(c[static_cast<size_t>(r * ldc + j)], -1.0f) << "wrote past n";
      }
}

}  // namespace
}  // namespace headroom::attention_cpu
