// dropout on cpu: the kept fraction, the exact 1 / (1 - p) scaling, a mask
// that depends on (seed, index) alone (same seed, same mask, on any thread
// count; another seed, another mask), fp32 and bf16, in place, p = 0 as the
// identity, and backward = the op itself by finite differences of a float64
// reference; meta accepts, rejects and allocates exactly as cpu does.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/common/dropout_mask.h"
#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// 1M elements: the kept fraction's standard deviation is sqrt(p (1 - p) / n)
// <= 5e-4, so 1% is 20 of them; past kMinParallelElements, so threaded.
constexpr int64_t kRows = 1000, kWidth = 1000, kElements = kRows * kWidth;

// The raw bits of an fp32 or bf16 tensor: "exactly" means these, so -0 vs +0
// and a NaN's payload count.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

// Which elements survived: inputs are never zero (random_values), so an
// output of 0 is a dropped element.
std::vector<bool> kept_mask(const Tensor& out) {
  std::vector<double> v = download(out);
  std::vector<bool> kept(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    kept[i] = v[i] != 0;
  return kept;
}

double fraction_kept(const std::vector<bool>& kept) {
  int64_t count = 0;
  for (bool k : kept)
    count += k;
  return static_cast<double>(count) / static_cast<double>(kept.size());
}

// ---- the mask and the scaling ----

TEST(CpuDropout, KeepsOneMinusPAndScalesKeptValuesExactly) {
  for (float p : {0.1f, 0.5f}) {
    SCOPED_TRACE("p " + std::to_string(p));
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    std::vector<float> values = random_values(kElements, 1);
    Tensor x = make(be, {kRows, kWidth}, DType::kF32, values, "mlp.out");
    Tensor out = be.empty({kRows, kWidth}, DType::kF32, Category::kActivation, "mlp.out.dropped");
    be.dropout(x, p, 42, out);

    EXPECT_NEAR(fraction_kept(kept_mask(out)), 1.0 - p, 0.01);
    // Kept: x times 1 / (1 - p) as one fp32 value, one rounding. Dropped: +0.
    // Which ones: dropout_keeps, the decision every backend shares.
    const float scale = 1.0f / (1.0f - p);
    const float* o = out.data<float>();
    int misses = 0;
    for (int64_t i = 0; i < kElements; ++i) {
      float expected = dropout_keeps(42, i, p) ? values[static_cast<size_t>(i)] * scale : 0.0f;
      if (std::memcmp(&o[i], &expected, sizeof expected) != 0 && ++misses <= 5)
        ADD_FAILURE() << "out[" << i << "] = " << o[i] << ", expected " << expected;
    }
    EXPECT_EQ(misses, 0);
  }
}

TEST(CpuDropout, TheMaskIsTheSeedsAlone) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const float p = 0.5f;
  Tensor x = make(be, {kRows, kWidth}, DType::kF32, random_values(kElements, 2), "x");
  Tensor a = be.empty({kRows, kWidth}, DType::kF32, Category::kActivation, "a");
  Tensor b = be.empty({kRows, kWidth}, DType::kF32, Category::kActivation, "b");
  Tensor c = be.empty({kRows, kWidth}, DType::kF32, Category::kActivation, "c");
  be.dropout(x, p, 7, a);
  be.dropout(x, p, 7, b);
  be.dropout(x, p, 8, c);  // the neighbouring seed: seeds are often a counter
  EXPECT_EQ(bytes_of(a), bytes_of(b));

  // Independent masks agree on p^2 + (1 - p)^2 of the elements (1/2 at p =
  // 1/2); the same mask would agree on all of them.
  std::vector<bool> mask_a = kept_mask(a), mask_c = kept_mask(c);
  int64_t agree = 0;
  for (size_t i = 0; i < mask_a.size(); ++i)
    agree += mask_a[i] == mask_c[i];
  EXPECT_NEAR(static_cast<double>(agree) / kElements, p * p + (1 - p) * (1 - p), 0.01);
}

TEST(CpuDropout, SameBitsForAnyThreadCount) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  Tensor x = make(be, {kRows, kWidth}, DType::kBF16, random_values(kElements, 3), "x");
  Tensor out = be.empty({kRows, kWidth}, DType::kBF16, Category::kActivation, "out");
  auto results = bytes_per_thread_count([] {}, [&] { be.dropout(x, 0.3f, 11, out); }, out);
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(results[i], results[0]) << "thread count #" << i;
}

TEST(CpuDropout, Bf16DropsTheSameElementsAndRoundsOnce) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const float p = 0.1f;
  std::vector<float> values = random_values(kElements, 4);
  Tensor x16 = make(be, {kRows, kWidth}, DType::kBF16, values, "x");
  Tensor x32 = make(be, {kRows, kWidth}, DType::kF32, values, "x");
  Tensor out16 = be.empty({kRows, kWidth}, DType::kBF16, Category::kActivation, "out");
  Tensor out32 = be.empty({kRows, kWidth}, DType::kF32, Category::kActivation, "out");
  be.dropout(x16, p, 5, out16);
  be.dropout(x32, p, 5, out32);
  // The mask does not depend on the dtype.
  EXPECT_EQ(kept_mask(out16), kept_mask(out32));
  EXPECT_NEAR(fraction_kept(kept_mask(out16)), 1.0 - p, 0.01);
  // bf16 widened, scaled in fp32, rounded to nearest even once.
  const float scale = 1.0f / (1.0f - p);
  const bf16* in = x16.data<bf16>();
  const bf16* o = out16.data<bf16>();
  int misses = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    bf16 expected = to_bf16(dropout_keeps(5, i, p) ? to_float(in[i]) * scale : 0.0f);
    if (o[i].bits != expected.bits && ++misses <= 5)
      ADD_FAILURE() << "out[" << i << "] = " << to_float(o[i]) << ", expected "
                    << to_float(expected);
  }
  EXPECT_EQ(misses, 0);
}

TEST(CpuDropout, InPlaceGivesTheSameBits) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    std::vector<float> values = random_values(kElements, 5);
    Tensor x = make(be, {kRows, kWidth}, dtype, values, "x");
    Tensor out = be.empty({kRows, kWidth}, dtype, Category::kActivation, "out");
    be.dropout(x, 0.25f, 9, out);
    be.dropout(x, 0.25f, 9, x);
    EXPECT_EQ(bytes_of(x), bytes_of(out)) << name_of(dtype);
  }
}

TEST(CpuDropout, ZeroPIsTheIdentity) {
  // Bit for bit, signed zeros and infinities included (x * 1 is exact).
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    std::vector<float> values = random_values(kElements, 6);
    values[0] = -0.0f;
    values[1] = std::numeric_limits<float>::infinity();
    values[2] = -std::numeric_limits<float>::infinity();
    values[3] = 3e38f;  // bf16: rounds to a large finite value
    Tensor x = make(be, {kRows, kWidth}, dtype, values, "x");
    Tensor out = be.empty({kRows, kWidth}, dtype, Category::kActivation, "out");
    be.dropout(x, 0.0f, 13, out);
    EXPECT_EQ(bytes_of(out), bytes_of(x)) << name_of(dtype);
    be.dropout(x, 0.0f, 13, x);  // in place: nothing changes
    EXPECT_EQ(bytes_of(out), bytes_of(x)) << name_of(dtype);
  }
}

TEST(CpuDropout, DroppedNonFiniteValuesBecomeZero) {
  // A select, not x * 0: a dropped inf or NaN has a zero gradient, and so a
  // zero output. Kept ones stay non-finite.
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const int64_t n = 4096;
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[static_cast<size_t>(i)] = i % 2 == 0 ? std::numeric_limits<float>::infinity()
                                                : std::numeric_limits<float>::quiet_NaN();
  Tensor x = make(be, {n}, DType::kF32, values, "x");
  Tensor out = be.empty({n}, DType::kF32, Category::kActivation, "out");
  be.dropout(x, 0.5f, 17, out);
  for (int64_t i = 0; i < n; ++i) {
    float v = out.data<float>()[i];
    if (dropout_keeps(17, i, 0.5f))
      ASSERT_FALSE(std::isfinite(v)) << i;
    else
      ASSERT_TRUE(v == 0.0f && !std::signbit(v)) << i << ": " << v;
  }
}

// ---- backward: the op itself ----

struct Case {
  int64_t rows, width;
  float p;
  DType dtype;
  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(width) + " p " + std::to_string(p) + " " +
           std::string(name_of(dtype));
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t rows : {1, 17, 300})  // 300 x 130: the parallel path
    for (int64_t width : {5, 130})
      for (float p : {0.1f, 0.5f, 0.9f})
        for (DType dtype : {DType::kF32, DType::kBF16})
          all.push_back({rows, width, p, dtype});
  return all;
}

TEST(CpuDropout, BackwardIsTheSameOpByFiniteDifferences) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t n = c.rows * c.width;
    const uint64_t seed = 1234;
    Tensor x = make(be, {c.rows, c.width}, c.dtype, random_values(n, 7), "x");
    Tensor w = make(be, {c.rows, c.width}, c.dtype, random_values(n, 8), "w");  // dLoss/dout
    Tensor out = be.empty({c.rows, c.width}, c.dtype, Category::kActivation, "out");
    Tensor dx = be.empty({c.rows, c.width}, c.dtype, Category::kActivation, "dx");
    be.dropout(x, c.p, seed, out);
    be.dropout(w, c.p, seed, dx);  // backward: the same op on the gradient

    // float64 forward: x[i] / (1 - p) where kept, else 0; the loss is
    // sum w * out and element i of x reaches only term i. The function is
    // linear, so the central difference is exact up to rounding (~1e-16 / h).
    std::vector<double> xs = download(x), ws = download(w);
    const double keep_scale = 1.0 / (1.0 - static_cast<double>(c.p));
    std::vector<double> out_ref(xs.size()), dx_ref(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      bool kept = dropout_keeps(seed, static_cast<int64_t>(i), c.p);
      auto term = [&] { return ws[i] * (kept ? xs[i] * keep_scale : 0.0); };
      out_ref[i] = kept ? xs[i] * keep_scale : 0.0;
      dx_ref[i] = central_difference(term, xs[i], 1e-3);
    }
    // fp32: 1 / (1 - p) rounded, then one product rounded: 2 ulps (1.2e-7);
    // 1e-6 leaves margin, and a scale of 1 or 1 - p instead of 1 / (1 - p)
    // is off by 10% or more. bf16: plus one rounding of the result, 2^-8.
    double rtol = c.dtype == DType::kF32 ? 1e-6 : std::ldexp(1.0, -7);
    expect_close(download(out), out_ref, rtol, 1e-12, "out " + c.name());
    expect_close(download(dx), dx_ref, rtol, 1e-9, "dx " + c.name());
  }
}

// ---- meta = cpu ----

TEST(MetaParity, Dropout) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor x = input(be, {300, 130}, dtype, "block.0.mlp.out", 1);
      Tensor out = be.empty({300, 130}, dtype, Category::kActivation, "block.0.mlp.out.dropped");
      be.dropout(x, 0.1f, 3, out);
      be.dropout(x, 0.0f, 3, out);
      be.dropout(out, 0.5f, 4, out);  // in place
      Tensor rows = x.rows(10, 20);
      be.dropout(rows, 0.25f, 5, rows);
    }
  });
}

TEST(MetaParity, DropoutRejectedCallsSayTheSameAndAllocateNothing) {
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kBF16, Category::kActivation, "block.1.attn.out");
              Tensor o = be.empty({4, 9}, DType::kBF16, Category::kActivation, "o");
              be.dropout(x, 0.1f, 1, o);
            }),
            "dropout: shape mismatch: x 'block.1.attn.out' bf16 [4, 8] vs out 'o' bf16 [4, 9]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              Tensor o = be.empty({4, 8}, DType::kBF16, Category::kActivation, "o");
              be.dropout(x, 0.1f, 1, o);
            }),
            "dropout: dtype mismatch: x 'x' fp32 [4, 8] vs out 'o' bf16 [4, 8]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              be.dropout(x, 1.0f, 1, x);
            }),
            "dropout: p 1 must be in [0, 1) (x 'x' fp32 [4, 8])");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              be.dropout(x, -0.25f, 1, x);
            }),
            "dropout: p -0.25 must be in [0, 1) (x 'x' fp32 [4, 8])");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              be.dropout(x, std::numeric_limits<float>::quiet_NaN(), 1, x);
            }),
            "dropout: p nan must be in [0, 1) (x 'x' fp32 [4, 8])");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4}, DType::kI32, Category::kActivation, "ids");
              be.dropout(x, 0.1f, 1, x);
            }),
            "dropout: x 'ids' int32 [4] must be fp32, bf16 or fp16");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({8, 8}, DType::kF32, Category::kActivation, "x");
              Tensor in = x.rows(0, 4), shifted = x.rows(2, 6);
              be.dropout(in, 0.1f, 1, shifted);
            }),
            "dropout: out 'x' fp32 [4, 8] partially overlaps x 'x' fp32 [4, 8]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              Tensor undefined;
              be.dropout(x, 0.1f, 1, undefined);
            }),
            "dropout: out is an undefined tensor");
}

}  // namespace
}  // namespace headroom::backend_test
