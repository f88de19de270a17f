// copy_from_host / copy_to_host, scale, sum_squares and bias_forward /
// bias_backward on cpu against float64 references (and finite differences of
// the reference for bias_backward); bit-identical reductions on 1 and many
// threads; meta accepts, rejects and allocates exactly as cpu does.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// ---- copy_from_host / copy_to_host ----

TEST(CpuHostTransfer, RoundTripsEveryDtypeAndSize) {
  BackendUnderTest cpu(kCpu);
  // 3 MiB + a bit: several 1 MiB chunks on several threads, and a ragged tail.
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{786433}}) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
      Tensor t = cpu.backend->empty({n}, dtype, Category::kActivation, "t");
      std::vector<uint8_t> from(t.nbytes()), back(t.nbytes(), 0);
      for (size_t i = 0; i < from.size(); ++i)
        from[i] = static_cast<uint8_t>(i * 131 + 7);
      cpu.backend->copy_from_host(from.data(), t);
      ASSERT_EQ(std::memcmp(t.raw(), from.data(), from.size()), 0);
      cpu.backend->copy_to_host(t, back.data());
      ASSERT_EQ(back, from);
    }
  }
}

TEST(CpuHostTransfer, NullHostPointerOnlyForAnEmptyTensor) {
  BackendUnderTest cpu(kCpu);
  Tensor empty = cpu.backend->empty({0}, DType::kF32, Category::kActivation, "empty");
  EXPECT_NO_THROW(cpu.backend->copy_from_host(nullptr, empty));
  EXPECT_NO_THROW(cpu.backend->copy_to_host(empty, nullptr));
  Tensor t = cpu.backend->empty({4}, DType::kI32, Category::kActivation, "batch.tokens");
  try {
    cpu.backend->copy_from_host(nullptr, t);
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "copy_from_host: host src is null for dst 'batch.tokens' int32 [4]");
  }
  EXPECT_THROW(cpu.backend->copy_to_host(t, nullptr), InternalError);
}

TEST(MetaHostTransfer, CopyToHostWritesZerosAndCopyFromHostStoresNothing) {
  BackendUnderTest meta(kMeta);
  Tensor t = meta.backend->empty({5, 3}, DType::kF32, Category::kActivation, "loss");
  std::vector<float> host(15, 1.5f);
  meta.backend->copy_from_host(host.data(), t);  // a virtual address: must not be written
  std::vector<uint8_t> back(t.nbytes(), 0xab);
  meta.backend->copy_to_host(t, back.data());
  EXPECT_EQ(back, std::vector<uint8_t>(t.nbytes(), 0));
}

// ---- scale ----

TEST(CpuScale, MultipliesInFp32AndRoundsOnce) {
  BackendUnderTest cpu(kCpu);
  const float alpha = 0.3f;  // not a power of two: every product rounds
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{65 * 1031}}) {
    std::vector<float> x = random_values(n, 1);
    Tensor f = make(*cpu.backend, {n}, DType::kF32, x, "f");
    Tensor h = make(*cpu.backend, {n}, DType::kBF16, x, "h");
    std::vector<double> h_before = download(h);
    cpu.backend->scale(f, alpha);
    cpu.backend->scale(h, alpha);
    for (int64_t i = 0; i < n; ++i) {
      auto k = static_cast<size_t>(i);
      ASSERT_EQ(std::bit_cast<uint32_t>(f.data<float>()[i]), std::bit_cast<uint32_t>(x[k] * alpha));
      ASSERT_EQ(h.data<bf16>()[i].bits, to_bf16(static_cast<float>(h_before[k]) * alpha).bits);
    }
  }
}

TEST(CpuScale, ZeroKeepsNonFiniteValuesNonFinite) {
  BackendUnderTest cpu(kCpu);
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = make(*cpu.backend, {3}, DType::kF32, {std::nanf(""), inf, 2.0f}, "grads");
  cpu.backend->scale(x, 0.0f);
  std::vector<double> v = download(x);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));  // inf * 0
  EXPECT_EQ(v[2], 0.0);
  Tensor ints = cpu.backend->empty({3}, DType::kI32, Category::kActivation, "ints");
  EXPECT_THROW(cpu.backend->scale(ints, 2.0f), InternalError);
}

// ---- sum_squares ----

// Awkward sizes: 1, odd, just past a SIMD width, fewer elements than the 256
// fixed partitions, and sizes above the OpenMP threshold (32768).
const std::vector<Shape> kSumShapes = {{1}, {3}, {17}, {5, 13}, {65, 130}, {3, 17, 1031}};

TEST(CpuSumSquares, AccumulatesOntoOutLikeAFloat64Reference) {
  BackendUnderTest cpu(kCpu);
  for (const Shape& shape : kSumShapes) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor x = make(*cpu.backend, shape, dtype, random_values(numel_of(shape), 3), "x");
      Tensor out = make(*cpu.backend, {1}, DType::kF32, {1.5f}, "grad_norm_sq");
      cpu.backend->sum_squares(x, out);
      double expected = 1.5;
      for (double v : download(x))
        expected += v * v;
      // Summed in double (relative error ~1e-16 * log n), rounded into fp32
      // once: within half an fp32 ulp, 2^-24 relative; 2^-23 leaves margin.
      // A sum kept in fp32 misses this by ~1e-6 at the larger sizes.
      expect_close({download(out)[0]}, {expected}, std::ldexp(1.0, -23), 0,
                   "sum_squares " + shape_to_string(shape) + " " + std::string(name_of(dtype)));
      // Accumulates: a second call adds the same sum again.
      cpu.backend->sum_squares(x, out);
      expect_close({download(out)[0]}, {2 * expected - 1.5}, std::ldexp(1.0, -22), 0, "again");
    }
  }
}

TEST(CpuSumSquares, NonFiniteInputMakesOutNonFinite) {
  BackendUnderTest cpu(kCpu);
  const int64_t n = 65 * 1031;  // the parallel path
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 1e30f}) {
      for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> values = random_values(n, 4);
        values[static_cast<size_t>(at)] = bad;
        Tensor x = make(*cpu.backend, {n}, dtype, values, "grads");
        Tensor out = make(*cpu.backend, {1}, DType::kF32, {0.0f}, "norm_sq");
        cpu.backend->sum_squares(x, out);
        // 1e30^2 is finite in double but not in fp32: out overflows to inf.
        EXPECT_FALSE(std::isfinite(download(out)[0])) << bad << " at " << at;
      }
    }
  }
}

TEST(CpuSumSquares, SameBitsForAnyThreadCount) {
  BackendUnderTest cpu(kCpu);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const int64_t n = (int64_t{1} << 20) + 3;
    // Values of mixed magnitude, so the rounding depends on the order of the
    // additions. An fp32 per-thread reduction fails this; a per-thread double
    // reduction differs from the fixed partition only below fp32's resolution
    // (visible in out at rare rounding boundaries), which is why the op
    // fixes the partition instead of relying on that.
    std::vector<float> values = random_values(n, 5);
    for (size_t i = 0; i < values.size(); i += 7)
      values[i] *= 1000.0f;
    Tensor x = make(*cpu.backend, {n}, dtype, values, "x");
    Tensor out = cpu.backend->empty({1}, DType::kF32, Category::kActivation, "out");
    auto results = bytes_per_thread_count([&] { upload(out, {0.25f}); },
                                          [&] { cpu.backend->sum_squares(x, out); }, out);
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(results[i], results[0]) << name_of(dtype) << ", thread count #" << i;
  }
}

// ---- bias ----

const std::vector<int64_t> kRows = {1, 3, 17, 300};  // 300 x 130: the parallel path
const std::vector<int64_t> kWidths = {5, 64, 130};

TEST(CpuBias, ForwardAddsInFp32AndRoundsOnce) {
  BackendUnderTest cpu(kCpu);
  for (int64_t rows : kRows) {
    for (int64_t width : kWidths) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        Tensor x = make(*cpu.backend, {rows, width}, dtype, random_values(rows * width, 6), "q");
        Tensor b = make(*cpu.backend, {width}, dtype, random_values(width, 7), "q_bias");
        std::vector<double> xs = download(x), bs = download(b);
        cpu.backend->bias_forward(x, b);
        std::vector<double> ys = download(x);
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t c = 0; c < width; ++c) {
            auto i = static_cast<size_t>(t * width + c);
            float sum = static_cast<float>(xs[i]) + static_cast<float>(bs[static_cast<size_t>(c)]);
            double expected = dtype == DType::kF32 ? sum : to_float(to_bf16(sum));
            ASSERT_EQ(ys[i], expected) << "[" << t << ", " << c << "]";
          }
      }
    }
  }
}

TEST(CpuBias, BackwardMatchesFiniteDifferences) {
  BackendUnderTest cpu(kCpu);
  for (int64_t rows : kRows) {
    for (int64_t width : kWidths) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        Tensor dy = make(*cpu.backend, {rows, width}, dtype, random_values(rows * width, 8), "dy");
        Tensor d_bias = make(*cpu.backend, {width}, dtype, random_values(width, 9), "d_bias");
        std::vector<double> before = download(d_bias);
        cpu.backend->bias_backward(dy, d_bias);

        // Loss = sum dy * (x + b) of the float64 forward; x drops out of the
        // derivative, so x = 0. The loss is linear in b: central differences
        // are exact up to rounding, ~1e-16 * rows / h.
        std::vector<double> g = download(dy), b(static_cast<size_t>(width), 0.5);
        auto loss = [&] {
          double l = 0;
          for (int64_t t = 0; t < rows; ++t)
            for (int64_t c = 0; c < width; ++c)
              l += g[static_cast<size_t>(t * width + c)] * b[static_cast<size_t>(c)];
          return l;
        };
        std::vector<double> expected = before;
        for (int64_t c = 0; c < width; ++c)
          expected[static_cast<size_t>(c)] +=
              central_difference(loss, b[static_cast<size_t>(c)], 1e-3);
        // fp32: a double sum rounded once (2^-24) plus the FD's rounding; 1e-6
        // relative and absolute covers both. bf16: one rounding, at most 2^-8
        // relative (8 significant bits), so 2^-7. Dropping one row's term misses by >= 0.25.
        double rtol = dtype == DType::kF32 ? 1e-6 : std::ldexp(1.0, -7);
        expect_close(download(d_bias), expected, rtol, 1e-6,
                     "d_bias " + std::to_string(rows) + "x" + std::to_string(width) + " " +
                         std::string(name_of(dtype)));
      }
    }
  }
}

TEST(CpuBias, BackwardSameBitsForAnyThreadCount) {
  BackendUnderTest cpu(kCpu);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const int64_t rows = 40000, width = 130;  // long enough for threads to interleave
    Tensor dy = make(*cpu.backend, {rows, width}, dtype, random_values(rows * width, 10), "dy");
    Tensor d_bias = cpu.backend->empty({width}, dtype, Category::kGrad, "d_bias");
    std::vector<float> initial = random_values(width, 11);
    auto results = bytes_per_thread_count([&] { upload(d_bias, initial); },
                                          [&] { cpu.backend->bias_backward(dy, d_bias); }, d_bias);
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(results[i], results[0]) << name_of(dtype) << ", thread count #" << i;
  }
}

// ---- meta = cpu ----

TEST(MetaParity, HostTransferScaleSumSquaresBias) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor x = input(be, {300, 130}, dtype, "x", 1);
      std::vector<uint8_t> host(x.nbytes(), 1);
      be.copy_from_host(host.data(), x);
      be.copy_to_host(x, host.data());
      be.scale(x, 0.5f);
      Tensor out = be.empty({1}, DType::kF32, Category::kWorkspace, "grad_norm_sq");
      be.fill(out, 0.0f);
      be.sum_squares(x, out);
      Tensor b = input(be, {130}, dtype, "bias", 2);
      be.bias_forward(x, b);
      Tensor db = be.empty({130}, dtype, Category::kGrad, "bias.grad");
      be.fill(db, 0.0f);
      be.bias_backward(x, db);
    }
  });
}

TEST(MetaParity, RejectedCallsSayTheSameAndAllocateNothing) {
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor q = be.empty({4, 8}, DType::kF32, Category::kActivation, "block.0.attn.q");
              Tensor b = be.empty({9}, DType::kF32, Category::kParam, "block.0.attn.q_bias");
              be.bias_forward(q, b);
            }),
            "bias_forward: shape mismatch: bias 'block.0.attn.q_bias' fp32 [9] vs x "
            "'block.0.attn.q' fp32 [4, 8]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor dy = be.empty({4, 8}, DType::kBF16, Category::kActivation, "dq");
              Tensor db = be.empty({8}, DType::kF32, Category::kGrad, "q_bias.grad");
              be.bias_backward(dy, db);
            }),
            "bias_backward: dtype mismatch: dy 'dq' bf16 [4, 8] vs d_bias 'q_bias.grad' fp32 [8]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kBF16, Category::kGrad, "grads");
              Tensor out = be.empty({2}, DType::kF32, Category::kWorkspace, "norm_sq");
              be.sum_squares(x, out);
            }),
            "sum_squares: out 'norm_sq' fp32 [2] must be [1]");
  rejected_alike([](Backend& be) {
    Tensor x = be.empty({4}, DType::kF32, Category::kGrad, "grads");
    Tensor out = x.rows(1, 2);  // inside x
    be.sum_squares(x, out);
  });
  rejected_alike([](Backend& be) {
    Tensor x = be.empty({4}, DType::kI64, Category::kActivation, "ids");
    be.scale(x, 2.0f);
  });
}

}  // namespace
}  // namespace headroom::backend_test
