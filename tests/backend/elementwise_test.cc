// cpu fill, fill_uniform, copy, cast and add against float64 / bit-exact
// references. Elementwise ops round once, so every expectation here is exact.
#include <omp.h>

#include <bit>
#include <cmath>
#include <limits>

#include "backend/common/rng.h"
#include "backend_test_util.h"

namespace headroom::backend_test {
namespace {

constexpr BackendKind kCpu = BackendKind::kCpu;

// Awkward sizes: 1, odd, just past a SIMD width, and one that crosses the
// OpenMP threshold (kMinParallelElements = 32768) so the parallel loop runs.
const std::vector<Shape> kShapes = {{1}, {3}, {17}, {5, 13}, {65, 130}, {3, 17, 1031}};

TEST(CpuFill, FloatingAndIntegerDtypes) {
  BackendUnderTest cpu(kCpu);
  for (const Shape& shape : kShapes) {
    Tensor f = cpu.backend->empty(shape, DType::kF32, Category::kActivation, "f");
    cpu.backend->fill(f, -1.25f);
    for (double v : download(f))
      ASSERT_EQ(v, -1.25);

    // 0.1 is not a bf16: stored rounded to nearest even.
    Tensor h = cpu.backend->empty(shape, DType::kBF16, Category::kActivation, "h");
    cpu.backend->fill(h, 0.1f);
    for (double v : download(h))
      ASSERT_EQ(v, static_cast<double>(to_float(to_bf16(0.1f))));

    // Integers take the value truncated toward zero.
    Tensor i = cpu.backend->empty(shape, DType::kI32, Category::kActivation, "i");
    cpu.backend->fill(i, -2.75f);
    for (int64_t k = 0; k < i.numel(); ++k)
      ASSERT_EQ(i.data<int32_t>()[k], -2);
    Tensor l = cpu.backend->empty(shape, DType::kI64, Category::kActivation, "l");
    cpu.backend->fill(l, 3e9f);
    for (int64_t k = 0; k < l.numel(); ++k)
      ASSERT_EQ(l.data<int64_t>()[k], 3000000000);
    Tensor u = cpu.backend->empty(shape, DType::kU8, Category::kActivation, "u");
    cpu.backend->fill(u, 255.9f);
    for (int64_t k = 0; k < u.numel(); ++k)
      ASSERT_EQ(u.data<uint8_t>()[k], 255);
  }
}

TEST(CpuFill, NanIntoFloatsButNotIntoIntegers) {
  BackendUnderTest cpu(kCpu);
  Tensor f = cpu.backend->empty({7}, DType::kF32, Category::kActivation, "f");
  cpu.backend->fill(f, std::numeric_limits<float>::quiet_NaN());
  for (double v : download(f))
    ASSERT_TRUE(std::isnan(v));
  Tensor u = cpu.backend->empty({7}, DType::kU8, Category::kActivation, "u");
  EXPECT_THROW(cpu.backend->fill(u, std::numeric_limits<float>::quiet_NaN()), InternalError);
  EXPECT_THROW(cpu.backend->fill(u, 256.0f), InternalError);
  EXPECT_THROW(cpu.backend->fill(u, -1.0f), InternalError);
  Tensor i = cpu.backend->empty({7}, DType::kI32, Category::kActivation, "i");
  EXPECT_THROW(cpu.backend->fill(i, 3e9f), InternalError);
}

TEST(CpuFillUniform, MatchesTheCounterBasedStreamInRange) {
  BackendUnderTest cpu(kCpu);
  for (const Shape& shape : kShapes) {
    Tensor x = cpu.backend->empty(shape, DType::kF32, Category::kParam, "x");
    cpu.backend->fill_uniform(x, 42, -0.5f, 2.0f);
    const float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(p[i]),
                std::bit_cast<uint32_t>(random_uniform(42, static_cast<uint64_t>(i), -0.5f, 2.0f)));
      ASSERT_GE(p[i], -0.5f);
      ASSERT_LE(p[i], 2.0f);
    }
  }
}

TEST(CpuFillUniform, SameBitsOnOneThreadAndMany) {
  BackendUnderTest cpu(kCpu);
  // Large enough that the OpenMP loop is split across threads.
  const Shape shape = {257, 1031};
  Tensor one = cpu.backend->empty(shape, DType::kF32, Category::kParam, "one");
  Tensor many = cpu.backend->empty(shape, DType::kF32, Category::kParam, "many");
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu.backend->fill_uniform(one, 7, -1.0f, 1.0f);
  omp_set_num_threads(std::max(saved, 4));  // more threads than cores is fine: same bits
  cpu.backend->fill_uniform(many, 7, -1.0f, 1.0f);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.raw(), many.raw(), one.nbytes()), 0);
}

TEST(CpuFillUniform, StatisticsSeedsAndBf16) {
  BackendUnderTest cpu(kCpu);
  const int64_t n = 1 << 18;
  Tensor a = cpu.backend->empty({n}, DType::kF32, Category::kParam, "a");
  Tensor b = cpu.backend->empty({n}, DType::kF32, Category::kParam, "b");
  Tensor h = cpu.backend->empty({n}, DType::kBF16, Category::kParam, "h");
  cpu.backend->fill_uniform(a, 1, 2.0f, 6.0f);
  cpu.backend->fill_uniform(b, 2, 2.0f, 6.0f);
  cpu.backend->fill_uniform(h, 1, 2.0f, 6.0f);
  double sum = 0, sum_sq = 0;
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = a.data<float>()[i];
    ASSERT_GE(v, 2.0);
    ASSERT_LE(v, 6.0);
    sum += v;
    sum_sq += v * v;
    same += a.data<float>()[i] == b.data<float>()[i];
    // bf16 is the fp32 stream rounded, not another stream.
    ASSERT_EQ(h.data<bf16>()[i].bits, to_bf16(a.data<float>()[i]).bits);
  }
  // uniform(2, 6): mean 4, variance 16/12. With n = 2^18 the standard error
  // of the mean is ~0.0023; 0.02 is ~9 sigma, so this never flakes.
  double mean = sum / n;
  double variance = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 4.0, 0.02);
  EXPECT_NEAR(variance, 16.0 / 12.0, 0.02);
  EXPECT_LT(same, 10) << "seeds 1 and 2 must give unrelated streams";

  // A degenerate range is a constant; a reversed one is a bug.
  cpu.backend->fill_uniform(a, 3, 1.5f, 1.5f);
  for (double v : download(a))
    ASSERT_EQ(v, 1.5);
  EXPECT_THROW(cpu.backend->fill_uniform(a, 3, 1.0f, 0.0f), InternalError);
  Tensor i32 = cpu.backend->empty({4}, DType::kI32, Category::kParam, "i32");
  EXPECT_THROW(cpu.backend->fill_uniform(i32, 3, 0.0f, 1.0f), InternalError);
}

TEST(CpuCopy, EveryDtypeAndLargeChunkedCopies) {
  BackendUnderTest cpu(kCpu);
  // 3 MiB + a bit: several 1 MiB chunks and a ragged tail.
  std::vector<Shape> shapes = kShapes;
  shapes.push_back({786433});
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64, DType::kU8}) {
      Tensor src = cpu.backend->empty(shape, dtype, Category::kActivation, "src");
      Tensor dst = cpu.backend->empty(shape, dtype, Category::kActivation, "dst");
      auto* s = static_cast<uint8_t*>(src.raw());
      for (uint64_t i = 0; i < src.nbytes(); ++i)
        s[i] = static_cast<uint8_t>(i * 131 + 7);
      std::memset(dst.raw(), 0, dst.nbytes());
      cpu.backend->copy(src, dst);
      ASSERT_EQ(std::memcmp(src.raw(), dst.raw(), src.nbytes()), 0);
      cpu.backend->copy(dst, dst);  // itself: a no-op
      ASSERT_EQ(std::memcmp(src.raw(), dst.raw(), src.nbytes()), 0);
    }
  }
}

TEST(CpuCopy, RejectsPartialOverlapAndMismatches) {
  BackendUnderTest cpu(kCpu);
  Tensor x = cpu.backend->empty({8, 4}, DType::kF32, Category::kActivation, "x");
  Tensor head = x.rows(0, 4), shifted = x.rows(2, 6), tail = x.rows(4, 8);
  EXPECT_THROW(cpu.backend->copy(head, shifted), InternalError);
  EXPECT_NO_THROW(cpu.backend->copy(head, tail));
  Tensor y = cpu.backend->empty({4, 4}, DType::kBF16, Category::kActivation, "y");
  EXPECT_THROW(cpu.backend->copy(head, y), InternalError);  // dtype
  Tensor flat = tail.view({16});
  EXPECT_THROW(cpu.backend->copy(head, flat), InternalError);  // shape
}

// An independent bf16 rounding: pick the nearer of the two bf16 values that
// bracket f (computed in double, exact), the one with an even last mantissa
// bit on a tie. Checks to_bf16's bit trick as cast uses it.
uint16_t reference_bf16(float f) {
  if (std::isnan(f)) return 0;  // checked separately
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  if ((u & 0xffffu) == 0) return down;
  uint16_t up = static_cast<uint16_t>(down + 1);  // away from zero (may become inf)
  double lo = std::fabs(static_cast<double>(to_float(bf16{down})));
  double hi = (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128)  // the rounding boundary's "next"
                                        : std::fabs(static_cast<double>(to_float(bf16{up})));
  double a = std::fabs(static_cast<double>(f));
  if (a - lo < hi - a) return down;
  if (a - lo > hi - a) return up;
  return (down & 1) ? up : down;
}

TEST(CpuCast, Fp32ToBf16RoundsToNearestEven) {
  BackendUnderTest cpu(kCpu);
  const float one = 1.0f, ulp = std::ldexp(1.0f, -7);  // bf16 spacing at 1
  std::vector<float> values = {
      one + ulp / 2,                             // tie -> 1 (even)
      one + ulp + ulp / 2,                       // tie -> 1 + 2 ulp (even)
      -(one + ulp / 2),                          // sign-symmetric
      one + ulp / 2 + ulp / 64,                  // just above the tie -> up
      std::numeric_limits<float>::max(),         // rounds past the largest bf16: inf
      std::numeric_limits<float>::infinity(),    //
      -std::numeric_limits<float>::infinity(),   //
      -0.0f,                                     //
      std::numeric_limits<float>::denorm_min(),  // subnormals round too
      std::ldexp(1.0f, -130) * 1.00390625f,      //
  };
  // Plus random bit patterns across every exponent.
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(f)) values.push_back(f);
  }
  Tensor x = cpu.backend->empty({static_cast<int64_t>(values.size())}, DType::kF32,
                                Category::kActivation, "x");
  std::copy(values.begin(), values.end(), x.data<float>());
  Tensor y = cpu.backend->cast(x, DType::kBF16, Category::kActivation, "y");
  ASSERT_EQ(y.dtype(), DType::kBF16);
  ASSERT_EQ(y.shape(), x.shape());
  ASSERT_EQ(y.tag(), "y");
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(y.data<bf16>()[i].bits, reference_bf16(values[i]))
        << "value " << values[i] << " bits " << std::bit_cast<uint32_t>(values[i]);
  EXPECT_EQ(to_float(y.data<bf16>()[0]), 1.0f);
  EXPECT_EQ(to_float(y.data<bf16>()[1]), one + 2 * ulp);
  EXPECT_TRUE(std::isinf(to_float(y.data<bf16>()[4])));
  EXPECT_TRUE(std::signbit(to_float(y.data<bf16>()[7])));
}

TEST(CpuCast, NanStaysNanBothWays) {
  BackendUnderTest cpu(kCpu);
  Tensor x = cpu.backend->empty({3}, DType::kF32, Category::kActivation, "x");
  x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[1] = -std::numeric_limits<float>::quiet_NaN();
  // A signalling NaN whose payload lives only in the low 16 bits: truncating
  // would make it inf; it must stay NaN.
  x.data<float>()[2] = std::bit_cast<float>(0x7f800001u);
  Tensor y = cpu.backend->cast(x, DType::kBF16, Category::kActivation, "y");
  Tensor z = cpu.backend->cast(y, DType::kF32, Category::kActivation, "z");
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isnan(to_float(y.data<bf16>()[i]))) << i;
    EXPECT_TRUE(std::isnan(z.data<float>()[i])) << i;
  }
  EXPECT_TRUE(std::signbit(z.data<float>()[1]));
}

TEST(CpuCast, Bf16ToFp32IsExactAndRoundTrips) {
  BackendUnderTest cpu(kCpu);
  for (const Shape& shape : kShapes) {
    Tensor h = cpu.backend->empty(shape, DType::kBF16, Category::kActivation, "h");
    upload(h, random_values(h.numel(), 11));
    Tensor f = cpu.backend->cast(h, DType::kF32, Category::kActivation, "f");
    Tensor back = cpu.backend->cast(f, DType::kBF16, Category::kActivation, "back");
    ASSERT_EQ(download(f), download(h));
    ASSERT_EQ(std::memcmp(back.raw(), h.raw(), h.nbytes()), 0);
    Tensor same = cpu.backend->cast(f, DType::kF32, Category::kGrad, "same");
    ASSERT_FALSE(same.shares_storage_with(f));  // always a new tensor
    ASSERT_EQ(download(same), download(f));
  }
}

TEST(CpuCast, IntegersToFp32) {
  BackendUnderTest cpu(kCpu);
  Tensor i32 = cpu.backend->empty({4}, DType::kI32, Category::kActivation, "i32");
  int32_t iv[] = {-7, 0, (1 << 24) + 1, std::numeric_limits<int32_t>::min()};
  std::copy(iv, iv + 4, i32.data<int32_t>());
  Tensor f = cpu.backend->cast(i32, DType::kF32, Category::kActivation, "f");
  EXPECT_EQ(f.data<float>()[0], -7.0f);
  EXPECT_EQ(f.data<float>()[1], 0.0f);
  EXPECT_EQ(f.data<float>()[2], 16777216.0f);  // 2^24 + 1: nearest even is 2^24
  EXPECT_EQ(f.data<float>()[3], -2147483648.0f);

  Tensor i64 = cpu.backend->empty({2}, DType::kI64, Category::kActivation, "i64");
  i64.data<int64_t>()[0] = int64_t{1} << 40;
  i64.data<int64_t>()[1] = -3;
  Tensor g = cpu.backend->cast(i64, DType::kF32, Category::kActivation, "g");
  EXPECT_EQ(g.data<float>()[0], std::ldexp(1.0f, 40));
  EXPECT_EQ(g.data<float>()[1], -3.0f);

  Tensor u8 = cpu.backend->empty({2}, DType::kU8, Category::kActivation, "u8");
  u8.data<uint8_t>()[0] = 255;
  u8.data<uint8_t>()[1] = 1;
  Tensor h = cpu.backend->cast(u8, DType::kF32, Category::kActivation, "h");
  EXPECT_EQ(h.data<float>()[0], 255.0f);
  EXPECT_EQ(h.data<float>()[1], 1.0f);

  // Floats to integers are not a cast this engine needs.
  EXPECT_THROW(cpu.backend->cast(f, DType::kI32, Category::kActivation, "bad"), InternalError);
  EXPECT_THROW(cpu.backend->cast(i32, DType::kBF16, Category::kActivation, "bad"), InternalError);
}

TEST(CpuAdd, MatchesFloat64ReferenceRoundedOnce) {
  BackendUnderTest cpu(kCpu);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const Shape& shape : kShapes) {
      Tensor a = cpu.backend->empty(shape, dtype, Category::kActivation, "a");
      Tensor b = cpu.backend->empty(shape, dtype, Category::kActivation, "b");
      Tensor out = cpu.backend->empty(shape, dtype, Category::kActivation, "out");
      upload(a, random_values(a.numel(), 1));
      upload(b, random_values(b.numel(), 2));
      std::vector<double> va = download(a), vb = download(b);
      cpu.backend->add(a, b, out);
      std::vector<double> vo = download(out);
      // The float64 sum of two values of these magnitudes is exact, so one
      // rounding of it is the correctly rounded result the op must produce.
      for (size_t i = 0; i < vo.size(); ++i) {
        float exact = static_cast<float>(va[i] + vb[i]);
        double expected = dtype == DType::kF32 ? exact : to_float(to_bf16(exact));
        ASSERT_EQ(vo[i], expected) << name_of(dtype) << " " << shape_to_string(shape) << " @" << i;
      }
    }
  }
}

TEST(CpuAdd, OutputMayAliasEitherInput) {
  BackendUnderTest cpu(kCpu);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Shape shape = {65, 1031};  // parallel path
    Tensor a = cpu.backend->empty(shape, dtype, Category::kActivation, "a");
    Tensor b = cpu.backend->empty(shape, dtype, Category::kActivation, "b");
    upload(a, random_values(a.numel(), 3));
    upload(b, random_values(b.numel(), 4));
    std::vector<double> va = download(a), vb = download(b);
    auto round = [&](double v) {
      float f = static_cast<float>(v);
      return dtype == DType::kF32 ? static_cast<double>(f)
                                  : static_cast<double>(to_float(to_bf16(f)));
    };

    cpu.backend->add(a, b, a);  // residual stream: a += b
    std::vector<double> after = download(a);
    for (size_t i = 0; i < after.size(); ++i)
      ASSERT_EQ(after[i], round(va[i] + vb[i]));

    cpu.backend->add(a, b, b);  // b = a + b
    std::vector<double> b_after = download(b);
    for (size_t i = 0; i < b_after.size(); ++i)
      ASSERT_EQ(b_after[i], round(after[i] + vb[i]));

    cpu.backend->add(b, b, b);  // b = 2b, exact
    std::vector<double> doubled = download(b);
    for (size_t i = 0; i < doubled.size(); ++i)
      ASSERT_EQ(doubled[i], 2 * b_after[i]);
  }
}

TEST(CpuAdd, RejectsPartialOverlap) {
  BackendUnderTest cpu(kCpu);
  Tensor x = cpu.backend->empty({8, 4}, DType::kF32, Category::kActivation, "x");
  Tensor a = x.rows(0, 4), out = x.rows(1, 5);
  EXPECT_THROW(cpu.backend->add(a, a, out), InternalError);
}

}  // namespace
}  // namespace headroom::backend_test
