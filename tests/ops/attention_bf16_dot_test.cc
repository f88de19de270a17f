// The VDPBF16PS tile products of cpu attention (cpu/attention_bf16_dot.h):
// the pair packings to the word, the rounding transpose to the bit, and
// products of every shape the attention items ask for (accumulating or not,
// any column count) against a float64 sum of the same bf16 values.
#include "backend/cpu/attention_bf16_dot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

// Row counts and pair counts below, at, and past the 8 x 8 blocks.
TEST(Bf16Pairs, PackInterleavesEachRowsPairsAndZeroesThePadding) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t rows : {3, 8, 13, 16})
    for (int64_t cols : {4, 16, 22, 64}) {
      const int64_t stride = cols + 6, ld = (rows + 7) / 8 * 8 + 8;
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
          EXPECT_EQ(dst[static_cast<size_t>(p * ld + c)], expected)
              << "rows " << rows << " cols " << cols << " pair " << p << " column " << c;
        }
    }
}

// C = A B^T for A (m x k) and B (n x k), rows of B packed; every shape of
// tail: rows 1..13 (the 8- and 4-row blocks and 3, 2, 1 left), columns 8..72.
TEST(Bf16DotTile, MatchesAFloat64SumOfTheSameBf16Values) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 13})
    for (int64_t n : {8, 16, 24, 40, 64, 72})
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

// Operands for the blocking tests: A (m rows a_rs apart), B (n x k) packed
// in pairs with row length ld, and C's starting values (m rows ldc apart,
// bf16-representable, for the accumulating calls).
struct BlockingCase {
  std::vector<bf16> a;
  std::vector<uint32_t> packed;
  std::vector<float> start;
};
BlockingCase blocking_case(int64_t m, int64_t n, int64_t k, int64_t a_rs, int64_t ld, int64_t ldc,
                           uint32_t seed) {
  BlockingCase t;
  t.a = random_bf16(m * a_rs, seed);
  const std::vector<bf16> b = random_bf16(n * k, seed + 1);
  t.packed.resize(static_cast<size_t>(k / 2 * ld));
  pack_bf16_pairs(b.data(), k, n, k, t.packed.data(), ld);
  t.start.resize(static_cast<size_t>(m * ldc));
  for (size_t i = 0; i < t.start.size(); ++i)
    t.start[i] = to_float(random_bf16(1, seed * 100 + static_cast<uint32_t>(i))[0]);
  return t;
}

// The column blocks of 32 (512-bit vectors), 16 and 8 give a column the same
// bits: all n columns at once against the same product 8 columns at a time
// (which only the 8-wide, masked, path computes).
TEST(Bf16DotTile, ColumnBlockingNeverChangesABit) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t m : {1, 4, 5})
    for (int64_t n : {32, 47, 64, 100})
      for (int64_t k : {2, 64})
        for (bool accumulate : {false, true}) {
          const int64_t a_rs = k + 2, ld = (n + 7) / 8 * 8, ldc = n + 3;
          const BlockingCase t = blocking_case(m, n, k, a_rs, ld, ldc, 3);
          std::vector<float> whole = t.start, sliced = t.start;
          bf16_dot_tile(m, n, k, t.a.data(), a_rs, t.packed.data(), ld, whole.data(), ldc,
                        accumulate);
          for (int64_t j = 0; j < n; j += 8)
            bf16_dot_tile(m, std::min<int64_t>(8, n - j), k, t.a.data(), a_rs, t.packed.data() + j,
                          ld, sliced.data() + j, ldc, accumulate);
          ASSERT_EQ(std::memcmp(whole.data(), sliced.data(), whole.size() * sizeof(float)), 0)
              << "m " << m << " n " << n << " k " << k << " accumulate " << accumulate;
        }
}

TEST(Bf16Pairs, RowPackInterleavesPairsOfRowsAndZeroesAMissingLastRow) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t rows : {1, 2, 5, 8}) {
    const int64_t cols = 19, stride = 21, ld = 24;
    std::vector<bf16> src(static_cast<size_t>(rows * stride));
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = bf16{static_cast<uint16_t>(0x100 + i)};
    std::vector<uint32_t> dst(static_cast<size_t>((rows + 1) / 2 * ld), 0xdeadbeefu);
    pack_bf16_row_pairs(src.data(), stride, rows, cols, dst.data(), ld);
    for (int64_t p = 0; p < (rows + 1) / 2; ++p)
      for (int64_t x = 0; x < ld; ++x) {
        const auto bits = [&](int64_t r) {
          return r < rows ? uint32_t{src[static_cast<size_t>(r * stride + x)].bits} : 0u;
        };
        const uint32_t expected = x < cols ? (bits(2 * p) | bits(2 * p + 1) << 16) : 0xdeadbeefu;
        EXPECT_EQ(dst[static_cast<size_t>(p * ld + x)], expected)
            << "rows " << rows << " pair " << p << " column " << x;
      }
  }
}

// Every block shape: whole 8 x 8 blocks, row tails, column tails, both, and
// odd row counts (the zero padding); values that round up, down, to even,
// and NaN.
TEST(Bf16RoundTransposed, IsToBf16OfTheTransposeAndZeroPadsAnOddK) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t rows : {1, 7, 8, 9, 16, 21})
    for (int64_t cols : {1, 8, 13, 24}) {
      const int64_t lds = cols + 3, ldd = rows + 5;
      std::vector<float> src(static_cast<size_t>(rows * lds));
      for (float& v : src)
        v = normal(rng);
      src[0] = 1.0f + 0x1p-8f;                         // a tie: rounds to even (1.0)
      src[src.size() - 1] = 1.0f + 0x1p-7f + 0x1p-8f;  // a tie: rounds to even (up)
      if (rows * cols > 2) src[1] = std::numeric_limits<float>::quiet_NaN();
      std::vector<bf16> dst(static_cast<size_t>(cols * ldd), bf16{0x7777});
      round_transposed(src.data(), lds, rows, cols, dst.data(), ldd);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < ldd; ++r) {
          const uint16_t got = dst[static_cast<size_t>(c * ldd + r)].bits;
          uint16_t expected = 0x7777;
          if (r < rows) {
            const float v = src[static_cast<size_t>(r * lds + c)];
            if (std::isnan(v)) {
              EXPECT_TRUE(std::isnan(to_float(bf16{got}))) << r << ", " << c;
              continue;
            }
            expected = to_bf16(v).bits;
          } else if (r == rows && rows % 2 == 1) {
            expected = 0;
          }
          EXPECT_EQ(got, expected)
              << "rows " << rows << " cols " << cols << " at (" << r << ", " << c << ")";
        }
    }
}

// The row blocks of 8, 4 and the 3, 2, 1 left give a row the same bits: all
// m rows at once against the same product one row at a time.
TEST(Bf16DotTile, RowBlockingNeverChangesABit) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t m : {8, 9, 13, 16, 23})
    for (int64_t n : {8, 40, 64})
      for (bool accumulate : {false, true}) {
        const int64_t k = 64, a_rs = k + 2, ldc = n + 3;
        const BlockingCase t = blocking_case(m, n, k, a_rs, n, ldc, 5);
        std::vector<float> whole = t.start, by_row = t.start;
        bf16_dot_tile(m, n, k, t.a.data(), a_rs, t.packed.data(), n, whole.data(), ldc, accumulate);
        for (int64_t r = 0; r < m; ++r)
          bf16_dot_tile(1, n, k, t.a.data() + r * a_rs, a_rs, t.packed.data(), n,
                        by_row.data() + r * ldc, ldc, accumulate);
        ASSERT_EQ(std::memcmp(whole.data(), by_row.data(), whole.size() * sizeof(float)), 0)
            << "m " << m << " n " << n << " accumulate " << accumulate;
      }
}

// C += A B for B packed in pairs of rows, n of every tail (1..7 past a block
// of 8 or 16): C starts from known values, the columns past n stay as they
// were.
TEST(Bf16DotTile, AccumulatesOverRowPairsForAnyColumnCount) {
  if (!have_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (or HEADROOM_CPU_BF16_DOT=0)";
  for (int64_t m : {1, 3, 4, 6})
    for (int64_t n : {1, 5, 8, 12, 19, 31})
      for (int64_t k : {1, 2, 7, 64}) {
        const int64_t k_even = (k + 1) / 2 * 2, a_rs = k_even + 2, ldc = n + 8, ldb = n + 1;
        std::vector<bf16> a = random_bf16(m * a_rs, 3);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t p = k; p < k_even; ++p)
            a[static_cast<size_t>(r * a_rs + p)] = bf16{0};  // round_transposed's padding
        const std::vector<bf16> b = random_bf16(k * n, 4);
        std::vector<uint32_t> packed(static_cast<size_t>(k_even / 2 * ldb));
        pack_bf16_row_pairs(b.data(), n, k, n, packed.data(), ldb);
        std::vector<float> c(static_cast<size_t>(m * ldc));
        for (size_t i = 0; i < c.size(); ++i)
          c[i] = 0.25f * static_cast<float>(i % 7);
        const std::vector<float> before = c;
        bf16_dot_tile(m, n, k_even, a.data(), a_rs, packed.data(), ldb, c.data(), ldc,
                      /*accumulate=*/true);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t j = 0; j < ldc; ++j) {
            const size_t at = static_cast<size_t>(r * ldc + j);
            if (j >= n) {
              EXPECT_EQ(c[at], before[at]) << "wrote past n";
              continue;
            }
            double sum = before[at], magnitude = std::fabs(before[at]);
            for (int64_t p = 0; p < k; ++p) {
              const double term =
                  static_cast<double>(to_float(a[static_cast<size_t>(r * a_rs + p)])) *
                  static_cast<double>(to_float(b[static_cast<size_t>(p * n + j)]));
              sum += term;
              magnitude += std::fabs(term);
            }
            const double bound = static_cast<double>(k + 1) * 0x1p-24 * magnitude + 1e-30;
            EXPECT_NEAR(c[at], sum, bound)
                << "m " << m << " n " << n << " k " << k << " at (" << r << ", " << j << ")";
          }
      }
}

}  // namespace
}  // namespace headroom::attention_cpu
