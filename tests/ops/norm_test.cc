// rmsnorm_forward / rmsnorm_backward on cpu against a float64 reference and
// central finite differences of it, fp32 and bf16, at awkward sizes;
// bit-identical results on 1 and many threads; meta accepts, rejects and
// allocates exactly as cpu does.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// ---- float64 reference ----

// One row: y = x * r * w, r = 1 / sqrt(mean(x^2) + eps); returns r.
double reference_row(const double* x, const double* w, int64_t width, double eps, double* y) {
  double sum = 0;
  for (int64_t i = 0; i < width; ++i)
    sum += x[i] * x[i];
  double r = 1.0 / std::sqrt(sum / static_cast<double>(width) + eps);
  for (int64_t i = 0; i < width; ++i)
    y[i] = x[i] * r * w[i];
  return r;
}

// sum_i g[i] * y[i] for one row: the loss whose gradient backward computes.
double row_loss(const double* x, const double* w, const double* g, int64_t width, double eps) {
  std::vector<double> y(static_cast<size_t>(width));
  reference_row(x, w, width, eps, y.data());
  double loss = 0;
  for (int64_t i = 0; i < width; ++i)
    loss += g[i] * y[static_cast<size_t>(i)];
  return loss;
}

struct Case {
  int64_t rows, width;
  float eps;
  DType dtype;
  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(width) + " eps " + std::to_string(eps) +
           " " + std::string(name_of(dtype));
  }
};

// Awkward sizes (1 row, odd widths, a width past a SIMD multiple; Qwen3's
// per-head q/k norm is (T*H, D) with D = 64 or 128) and 300 x 130, past the
// OpenMP threshold. eps = 0.5 makes eps's place in the formula visible, which
// 1e-6 against mean squares ~0.4 would not be.
std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t rows : {1, 3, 17, 300})
    for (int64_t width : {5, 64, 130})
      for (float eps : {1e-6f, 0.5f})
        for (DType dtype : {DType::kF32, DType::kBF16})
          all.push_back({rows, width, eps, dtype});
  return all;
}

// ---- forward ----

TEST(CpuRmsNorm, ForwardMatchesFloat64Reference) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    Tensor x = make(be, {c.rows, c.width}, c.dtype, random_values(c.rows * c.width, 1), "x");
    Tensor w = make(be, {c.width}, c.dtype, random_values(c.width, 2), "w");
    Tensor y = be.empty({c.rows, c.width}, c.dtype, Category::kActivation, "y");
    Tensor rstd = be.empty({c.rows}, DType::kF32, Category::kActivation, "rstd");
    be.rmsnorm_forward(x, w, c.eps, y, rstd);

    std::vector<double> xs = download(x), ws = download(w);
    std::vector<double> y_ref(xs.size()), rstd_ref(static_cast<size_t>(c.rows));
    for (int64_t n = 0; n < c.rows; ++n)
      rstd_ref[static_cast<size_t>(n)] =
          reference_row(&xs[static_cast<size_t>(n * c.width)], ws.data(), c.width, c.eps,
                        &y_ref[static_cast<size_t>(n * c.width)]);
    // rstd: from a double sum, rounded to fp32 once (2^-24 relative; 2^-23
    // leaves margin). y: two fp32 products on top, ~3 fp32 ulps; 1e-6 leaves
    // margin. bf16 y: one rounding, at most 2^-8 relative (8
    // significant bits), so 2^-7.
    expect_close(download(rstd), rstd_ref, std::ldexp(1.0, -23), 0, "rstd " + c.name());
    double rtol = c.dtype == DType::kF32 ? 1e-6 : std::ldexp(1.0, -7);
    expect_close(download(y), y_ref, rtol, 1e-7, "y " + c.name());
  }
}

// ---- backward ----

TEST(CpuRmsNorm, BackwardMatchesFiniteDifferences) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t rows = c.rows, width = c.width;
    Tensor x = make(be, {rows, width}, c.dtype, random_values(rows * width, 3), "x");
    Tensor w = make(be, {width}, c.dtype, random_values(width, 4), "w");
    Tensor dy = make(be, {rows, width}, c.dtype, random_values(rows * width, 5), "dy");
    Tensor y = be.empty({rows, width}, c.dtype, Category::kActivation, "y");
    Tensor rstd = be.empty({rows}, DType::kF32, Category::kActivation, "rstd");
    Tensor dx = be.empty({rows, width}, c.dtype, Category::kActivation, "dx");
    Tensor dw = make(be, {width}, c.dtype, random_values(width, 6), "dw");
    std::vector<double> dw_before = download(dw);
    be.rmsnorm_forward(x, w, c.eps, y, rstd);
    be.rmsnorm_backward(dy, x, w, rstd, dx, dw);

    // Central differences of the float64 loss sum(dy * y) at the (rounded)
    // inputs the op saw. Row n's loss depends on x only through row n, so
    // each dx derivative needs one row. h = 1e-4: truncation ~h^2 * |f'''|
    // ~1e-8, rounding ~1e-16 / h ~1e-12.
    std::vector<double> xs = download(x), ws = download(w), g = download(dy);
    const double h = 1e-4, eps = c.eps;
    std::vector<double> dx_ref(xs.size()), dw_ref = dw_before;
    for (int64_t n = 0; n < rows; ++n) {
      double* xr = &xs[static_cast<size_t>(n * width)];
      const double* gr = &g[static_cast<size_t>(n * width)];
      for (int64_t i = 0; i < width; ++i)
        dx_ref[static_cast<size_t>(n * width + i)] =
            central_difference([&] { return row_loss(xr, ws.data(), gr, width, eps); }, xr[i], h);
    }
    auto total_loss = [&] {
      double loss = 0;
      for (int64_t n = 0; n < rows; ++n)
        loss += row_loss(&xs[static_cast<size_t>(n * width)], ws.data(),
                         &g[static_cast<size_t>(n * width)], width, eps);
      return loss;
    };
    for (int64_t i = 0; i < width; ++i)
      dw_ref[static_cast<size_t>(i)] +=
          central_difference(total_loss, ws[static_cast<size_t>(i)], h);

    // fp32: dx is r*dy*w - (r^3/C * dot)*x with terms up to ~3, each a few
    // fp32 ulps off (~1e-6 absolute) and they can cancel, hence the absolute
    // part; dw sums up to 300 such terms in double. 1e-5 is well above both
    // and the FD error, and far below what a missing term or a misplaced eps
    // (with eps = 0.5) costs (> 1e-2). bf16: plus one rounding of the
    // result, at most 2^-8 relative, so 2^-7.
    double rtol = c.dtype == DType::kF32 ? 1e-5 : std::ldexp(1.0, -7);
    expect_close(download(dx), dx_ref, rtol, 1e-5, "dx " + c.name());
    expect_close(download(dw), dw_ref, rtol, 1e-5, "dw " + c.name());
  }
}

TEST(CpuRmsNorm, SameBitsForAnyThreadCount) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t rows = 20000, width = 130;  // long enough for threads to interleave
    Tensor x = make(be, {rows, width}, dtype, random_values(rows * width, 7), "x");
    Tensor w = make(be, {width}, dtype, random_values(width, 8), "w");
    Tensor dy = make(be, {rows, width}, dtype, random_values(rows * width, 9), "dy");
    Tensor y = be.empty({rows, width}, dtype, Category::kActivation, "y");
    Tensor rstd = be.empty({rows}, DType::kF32, Category::kActivation, "rstd");
    Tensor dx = be.empty({rows, width}, dtype, Category::kActivation, "dx");
    Tensor dw = be.empty({width}, dtype, Category::kGrad, "dw");
    std::vector<float> dw_initial = random_values(width, 10);
    auto forward =
        bytes_per_thread_count([] {}, [&] { be.rmsnorm_forward(x, w, 1e-6f, y, rstd); }, y);
    auto backward = bytes_per_thread_count(
        [&] { upload(dw, dw_initial); }, [&] { be.rmsnorm_backward(dy, x, w, rstd, dx, dw); }, dw);
    for (size_t i = 1; i < forward.size(); ++i) {
      EXPECT_EQ(forward[i], forward[0]) << "y, " << name_of(dtype) << ", thread count #" << i;
      EXPECT_EQ(backward[i], backward[0]) << "dw, " << name_of(dtype) << ", thread count #" << i;
    }
  }
}

// A frozen norm weight (LoRA) is an undefined dw: dx is the same loop's, so
// the same bits, and nothing is allocated either way.
TEST(CpuRmsNorm, FrozenWeightGivesTheSameDx) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t rows = c.rows, width = c.width;
    Tensor x = make(be, {rows, width}, c.dtype, random_values(rows * width, 11), "x");
    Tensor w = make(be, {width}, c.dtype, random_values(width, 12), "w");
    Tensor dy = make(be, {rows, width}, c.dtype, random_values(rows * width, 13), "dy");
    Tensor y = be.empty({rows, width}, c.dtype, Category::kActivation, "y");
    Tensor rstd = be.empty({rows}, DType::kF32, Category::kActivation, "rstd");
    Tensor dx = be.empty({rows, width}, c.dtype, Category::kActivation, "dx");
    Tensor dx_frozen = be.empty({rows, width}, c.dtype, Category::kActivation, "dx.frozen");
    Tensor dw = make(be, {width}, c.dtype, random_values(width, 14), "dw");
    Tensor frozen;  // undefined
    be.rmsnorm_forward(x, w, c.eps, y, rstd);
    EventRecorder recorder(cpu.allocator);
    be.rmsnorm_backward(dy, x, w, rstd, dx, dw);
    be.rmsnorm_backward(dy, x, w, rstd, dx_frozen, frozen);
    EXPECT_TRUE(recorder.events().empty()) << c.name();
    EXPECT_FALSE(frozen.defined());
    const auto* a = static_cast<const uint8_t*>(dx.raw());
    const auto* b = static_cast<const uint8_t*>(dx_frozen.raw());
    EXPECT_EQ(std::vector<uint8_t>(a, a + dx.nbytes()), std::vector<uint8_t>(b, b + dx.nbytes()))
        << c.name();
  }
}

// ---- meta = cpu ----

TEST(MetaParity, RmsNorm) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor x = input(be, {300, 130}, dtype, "block.0.x", 1);
      Tensor w = input(be, {130}, dtype, "block.0.attn_norm", 2);
      Tensor y = be.empty({300, 130}, dtype, Category::kActivation, "block.0.attn_norm.out");
      Tensor rstd = be.empty({300}, DType::kF32, Category::kActivation, "block.0.attn_norm.rstd");
      be.rmsnorm_forward(x, w, 1e-6f, y, rstd);
      Tensor dx = be.empty({300, 130}, dtype, Category::kActivation, "block.0.x.grad");
      Tensor dw = be.empty({130}, dtype, Category::kGrad, "block.0.attn_norm.grad");
      be.fill(dw, 0.0f);
      be.rmsnorm_backward(y, x, w, rstd, dx, dw);
    }
  });
}

TEST(MetaParity, RmsNormFrozenWeight) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor x = input(be, {300, 130}, dtype, "block.0.x", 1);
      Tensor w = input(be, {130}, dtype, "block.0.attn_norm", 2);
      Tensor y = be.empty({300, 130}, dtype, Category::kActivation, "block.0.attn_norm.out");
      Tensor rstd = be.empty({300}, DType::kF32, Category::kActivation, "block.0.attn_norm.rstd");
      be.rmsnorm_forward(x, w, 1e-6f, y, rstd);
      Tensor dx = be.empty({300, 130}, dtype, Category::kActivation, "block.0.x.grad");
      Tensor frozen;
      be.rmsnorm_backward(y, x, w, rstd, dx, frozen);
    }
  });
}

TEST(MetaParity, RmsNormRejectedCallsSayTheSameAndAllocateNothing) {
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kBF16, Category::kActivation, "block.2.x");
              Tensor w = be.empty({9}, DType::kBF16, Category::kParam, "block.2.attn_norm");
              Tensor y = be.empty({4, 8}, DType::kBF16, Category::kActivation, "y");
              Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
              be.rmsnorm_forward(x, w, 1e-6f, y, rstd);
            }),
            "rmsnorm_forward: shape mismatch: w 'block.2.attn_norm' bf16 [9] vs x 'block.2.x' "
            "bf16 [4, 8]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kBF16, Category::kActivation, "x");
              Tensor w = be.empty({8}, DType::kBF16, Category::kParam, "w");
              Tensor y = be.empty({4, 8}, DType::kBF16, Category::kActivation, "y");
              Tensor rstd = be.empty({4}, DType::kBF16, Category::kActivation, "rstd");
              be.rmsnorm_forward(x, w, 1e-6f, y, rstd);
            }),
            "rmsnorm_forward: rstd 'rstd' bf16 [4] must be fp32");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              Tensor w = be.empty({8}, DType::kF32, Category::kParam, "w");
              Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
              be.rmsnorm_forward(x, w, 1e-6f, x, rstd);  // in place: backward needs x
            }),
            "rmsnorm_forward: y 'x' fp32 [4, 8] overlaps x 'x' fp32 [4, 8]");
  rejected_alike([](Backend& be) {
    Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
    Tensor w = be.empty({8}, DType::kF32, Category::kParam, "w");
    Tensor y = be.empty({4, 8}, DType::kF32, Category::kActivation, "y");
    Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
    be.rmsnorm_forward(x, w, -1.0f, y, rstd);
  });
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              Tensor w = be.empty({8}, DType::kF32, Category::kParam, "w");
              Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
              Tensor dx = be.empty({4, 8}, DType::kF32, Category::kActivation, "dx");
              Tensor dw = be.empty({8}, DType::kBF16, Category::kGrad, "w.grad");
              be.rmsnorm_backward(x, x, w, rstd, dx, dw);
            }),
            "rmsnorm_backward: dtype mismatch: dw 'w.grad' bf16 [8] vs w 'w' fp32 [8]");
  rejected_alike([](Backend& be) {
    Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
    Tensor dy = be.empty({4, 8}, DType::kF32, Category::kActivation, "dy");
    Tensor w = be.empty({8}, DType::kF32, Category::kParam, "w");
    Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
    Tensor dw = be.empty({8}, DType::kF32, Category::kGrad, "w.grad");
    be.rmsnorm_backward(dy, x, w, rstd, dy, dw);  // dx = dy: dw still reads dy
  });
  // Only dw may be left out: dx is what the layer below needs.
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              Tensor w = be.empty({8}, DType::kF32, Category::kParam, "w");
              Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
              Tensor dx, dw;
              be.rmsnorm_backward(x, x, w, rstd, dx, dw);
            }),
            "rmsnorm_backward: dx is an undefined tensor");
  // A frozen weight still needs dx disjoint from the inputs.
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
              Tensor dy = be.empty({4, 8}, DType::kF32, Category::kActivation, "dy");
              Tensor w = be.empty({8}, DType::kF32, Category::kParam, "w");
              Tensor rstd = be.empty({4}, DType::kF32, Category::kActivation, "rstd");
              Tensor frozen;
              be.rmsnorm_backward(dy, x, w, rstd, x, frozen);
            }),
            "rmsnorm_backward: dx 'x' fp32 [4, 8] overlaps x 'x' fp32 [4, 8]");
}

}  // namespace
}  // namespace headroom::backend_test
