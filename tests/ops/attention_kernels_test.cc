// cpu attention's small pieces (cpu/attention_kernels.h): the tile transpose
// against the element-by-element definition, for fp32 and bf16 sources
// (every row count around the 8 x 8 register blocks, head dims with and
// without an element tail, a padded ld, source rows further apart than the
// tile is wide; padding columns come back zero even where the buffer held
// garbage); and the softmax pieces on 16 lanes, as the AVX-512 clone runs
// them, against 8 lanes, as the AVX2 clone does: the same bits.
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
#define HR_TEST_AVX512_TARGET __attribute__((target("arch=x86-64-v4")))
#else
#define HR_TEST_AVX2_TARGET
#define HR_TEST_AVX512_TARGET
#endif

// transpose_tile as attention.cc's AVX2 clone compiles it, and as its
// baseline clone does.
template <typename T>
HR_TEST_AVX2_TARGET void transpose_avx2(const T* src, int64_t stride, int64_t rows, int64_t cols,
                                        float* dst, int64_t ld) {
  transpose_tile(src, stride, rows, cols, dst, ld);
}
template <typename T>
void transpose_baseline(const T* src, int64_t stride, int64_t rows, int64_t cols, float* dst,
                        int64_t ld) {
  transpose_tile(src, stride, rows, cols, dst, ld);
}

float as_float(float x) {
  return x;
}
float as_float(bf16 x) {
  return to_float(x);
}
void set(float& x, float value) {
  x = value;
}
void set(bf16& x, float value) {
  x = to_bf16(value);
}

template <typename T>
void check_every_shape() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int64_t rows : {1, 3, 7, 8, 9, 15, 16, 17, 64})
    for (int64_t cols : {4, 8, 12, 16, 64})
      for (int64_t extra_ld : {0, 8}) {
        const int64_t stride = cols + 5;
        const int64_t ld = round_up8(rows) + extra_ld;
        std::vector<T> src(static_cast<size_t>(rows * stride));
        for (T& x : src)
          set(x, normal(rng));
        for (auto transpose : {&transpose_avx2<T>, &transpose_baseline<T>}) {
          std::vector<float> dst(static_cast<size_t>(cols * ld), std::nanf(""));
          transpose(src.data(), stride, rows, cols, dst.data(), ld);
          for (int64_t d = 0; d < cols; ++d)
            for (int64_t c = 0; c < ld; ++c) {
              const float want = c < rows ? as_float(src[c * stride + d]) : 0.0f;
              const float got = dst[d * ld + c];
              ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0)
                  << "rows " << rows << " cols " << cols << " ld " << ld << " at [" << d << "]["
                  << c << "]: " << got << " vs " << want;
            }
        }
      }
}

TEST(TransposeTile, Fp32IsAnElementwiseCopyWithZeroPadding) {
  check_every_shape<float>();
}

TEST(TransposeTile, Bf16IsAnExactWideningWithZeroPadding) {
  check_every_shape<bf16>();
}

// ---- softmax pieces: 16 lanes against 8 ----

bool have_avx512() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4") != 0;
#else
  return false;
#endif
}

// One tile's inputs: keys x ld scores (and dP), per query a visible interval
// (some empty, some inverted, some the whole tile), a running max (some
// -inf: a query that has seen nothing yet), sum, lse and delta.
struct SoftmaxCase {
  int64_t keys = 0, ld = 0;
  std::vector<float> s_t, dp_t, max, sum, lse, delta;
  std::vector<int32_t> lo, hi;
};

SoftmaxCase softmax_case(int64_t keys, int64_t ld, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int32_t> key(0, static_cast<int32_t>(keys));
  SoftmaxCase c;
  c.keys = keys;
  c.ld = ld;
  for (int64_t i = 0; i < keys * ld; ++i) {
    c.s_t.push_back(normal(rng));
    c.dp_t.push_back(normal(rng));
  }
  for (int64_t r = 0; r < ld; ++r) {
    int32_t lo = key(rng), hi = key(rng);
    if (r % 5 == 0) lo = 0, hi = static_cast<int32_t>(keys);  // a full row
    c.lo.push_back(lo);
    c.hi.push_back(hi);  // lo >= hi: nothing visible
    c.max.push_back(r % 3 == 0 ? kMinusInfinity : normal(rng));
    c.sum.push_back(r % 3 == 0 ? 0.0f : std::fabs(normal(rng)) + 1.0f);
    c.lse.push_back(normal(rng));
    c.delta.push_back(normal(rng));
  }
  return c;
}

// Every output of the three softmax pieces, at one width.
struct SoftmaxOutputs {
  std::vector<float> s_t, max, sum, rescale, ds_t, p_rows;
};

template <bool kWide>
SoftmaxOutputs softmax_outputs(const SoftmaxCase& c) {
  SoftmaxOutputs o{c.s_t, c.max, c.sum, std::vector<float>(static_cast<size_t>(c.ld)),
                   c.s_t, c.s_t};
  softmax_update_by_columns(o.s_t.data(), c.keys, c.ld, c.lo.data(), c.hi.data(), 0.125f,
                            o.max.data(), o.sum.data(), o.rescale.data(), kWide);
  score_gradients_by_columns(o.ds_t.data(), c.dp_t.data(), c.keys, c.ld, c.lo.data(), c.hi.data(),
                             0.125f, c.lse.data(), c.delta.data(), kWide);
  // The row layout: `keys` rows of width ld, each with its own interval.
  for (int64_t r = 0; r < c.keys; ++r)
    probabilities_row(o.p_rows.data() + r * c.ld, c.ld, c.lo[static_cast<size_t>(r % c.ld)],
                      c.hi[static_cast<size_t>(r % c.ld)], 0.125f,
                      c.lse[static_cast<size_t>(r % c.ld)], kWide);
  return o;
}
HR_TEST_AVX512_TARGET SoftmaxOutputs softmax_on_16_lanes(const SoftmaxCase& c) {
  return softmax_outputs<true>(c);
}
HR_TEST_AVX2_TARGET SoftmaxOutputs softmax_on_8_lanes(const SoftmaxCase& c) {
  return softmax_outputs<false>(c);
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what,
                      int64_t keys, int64_t ld) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << what << " keys " << keys << " ld " << ld << " at " << i << ": " << a[i] << " vs "
        << b[i];
}

TEST(SoftmaxLanes, SixteenLanesHaveTheBitsOfEight) {
  if (!have_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 (x86-64-v4)";
  uint32_t seed = 1;
  for (int64_t keys : {1, 7, 16, 64})
    for (int64_t ld : {8, 16, 24, 40, 64}) {
      const SoftmaxCase c = softmax_case(keys, ld, seed++);
      const SoftmaxOutputs wide = softmax_on_16_lanes(c), narrow = softmax_on_8_lanes(c);
      expect_same_bits(wide.s_t, narrow.s_t, "probabilities", keys, ld);
      expect_same_bits(wide.max, narrow.max, "max", keys, ld);
      expect_same_bits(wide.sum, narrow.sum, "sum", keys, ld);
      expect_same_bits(wide.rescale, narrow.rescale, "rescale", keys, ld);
      expect_same_bits(wide.ds_t, narrow.ds_t, "dS", keys, ld);
      expect_same_bits(wide.p_rows, narrow.p_rows, "row probabilities", keys, ld);
      // Masked lanes are +0 and -inf maxima give a rescale of exactly 0.
      for (int64_t r = 0; r < ld; ++r) {
        if (c.max[static_cast<size_t>(r)] != kMinusInfinity) continue;
        const float zero = 0.0f;
        EXPECT_EQ(std::memcmp(&wide.rescale[static_cast<size_t>(r)], &zero, sizeof zero), 0);
      }
    }
}

}  // namespace
}  // namespace headroom::attention_cpu
