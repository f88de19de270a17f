// cpu attention's tile transpose (cpu/attention_kernels.h) against the
// element-by-element definition, for fp32 and bf16 sources: every row count
// around the 8 x 8 register blocks, head dims with and without an element
// tail, a padded ld, and source rows further apart than the tile is wide.
// Padding columns must come back zero even where the buffer held garbage.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace headroom::attention_cpu
