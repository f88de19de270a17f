// swiglu_forward / swiglu_backward on cpu against a float64 reference and
// central finite differences of it, fp32 and bf16, at awkward sizes; in-place
// use; meta accepts, rejects and allocates exactly as cpu does.
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// ---- float64 reference ----

double sigmoid(double g) {
  return 1.0 / (1.0 + std::exp(-g));
}
double silu(double g) {
  return g * sigmoid(g);
}

struct Case {
  int64_t rows, width;
  DType dtype;
  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(width) + " " + std::string(name_of(dtype));
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t rows : {1, 3, 17, 300})  // 300 x 130: the parallel path
    for (int64_t width : {5, 64, 130})
      for (DType dtype : {DType::kF32, DType::kBF16})
        all.push_back({rows, width, dtype});
  return all;
}

// Gates over about [-4, 4]: silu's bend (and its minimum near -1.28) matter,
// and a sigmoid with a wrong sign or a dropped factor shows.
std::vector<float> gates(int64_t n, uint64_t seed) {
  std::vector<float> v = random_values(n, seed);
  for (float& x : v)
    x *= 4.0f;
  return v;
}

// fp32: exp and a handful of fp32 operations, a few ulps (~5e-7 relative);
// 1e-6 relative leaves margin, 1e-7 absolute covers results near silu's
// zero. bf16: one rounding of the result, at most 2^-8 relative (8
// significant bits), so 2^-7.
double rtol_of(DType dtype) {
  return dtype == DType::kF32 ? 1e-6 : std::ldexp(1.0, -7);
}

// ---- tests ----

TEST(CpuSwiGlu, ForwardMatchesFloat64Reference) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t n = c.rows * c.width;
    Tensor gate = make(be, {c.rows, c.width}, c.dtype, gates(n, 1), "mlp.gate");
    Tensor up = make(be, {c.rows, c.width}, c.dtype, random_values(n, 2), "mlp.up");
    Tensor out = be.empty({c.rows, c.width}, c.dtype, Category::kActivation, "mlp.act");
    be.swiglu_forward(gate, up, out);
    std::vector<double> g = download(gate), u = download(up), expected(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      expected[i] = silu(g[i]) * u[i];
    expect_close(download(out), expected, rtol_of(c.dtype), 1e-7, "swiglu_forward " + c.name());
  }
}

TEST(CpuSwiGlu, ExtremeGatesStayFinite) {
  // exp(-g) overflows fp32 below g = -88.7: sigmoid must become 0, not NaN.
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  std::vector<float> g = {-1000.0f, -100.0f, -88.8f, -30.0f, 30.0f, 100.0f, 1000.0f};
  auto n = static_cast<int64_t>(g.size());
  std::vector<float> ones(g.size(), 1.0f);
  Tensor gate = make(be, {1, n}, DType::kF32, g, "gate");
  Tensor up = make(be, {1, n}, DType::kF32, ones, "up");
  Tensor out = be.empty({1, n}, DType::kF32, Category::kActivation, "out");
  Tensor d_gate = be.empty({1, n}, DType::kF32, Category::kActivation, "d_gate");
  Tensor d_up = be.empty({1, n}, DType::kF32, Category::kActivation, "d_up");
  be.swiglu_forward(gate, up, out);
  be.swiglu_backward(up, gate, up, d_gate, d_up);
  std::vector<double> y = download(out), dg = download(d_gate), du = download(d_up);
  for (size_t i = 0; i < g.size(); ++i) {
    double expected = silu(g[i]);
    double expected_grad = sigmoid(g[i]) * (1 + g[i] * (1 - sigmoid(g[i])));
    EXPECT_NEAR(y[i], expected, 1e-6 * std::fabs(expected) + 1e-30) << g[i];
    EXPECT_NEAR(du[i], expected, 1e-6 * std::fabs(expected) + 1e-30) << g[i];
    EXPECT_NEAR(dg[i], expected_grad, 1e-6) << g[i];
  }
}

TEST(CpuSwiGlu, BackwardMatchesFiniteDifferences) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t n = c.rows * c.width;
    Tensor gate = make(be, {c.rows, c.width}, c.dtype, gates(n, 3), "mlp.gate");
    Tensor up = make(be, {c.rows, c.width}, c.dtype, random_values(n, 4), "mlp.up");
    Tensor d_out = make(be, {c.rows, c.width}, c.dtype, random_values(n, 5), "mlp.act.grad");
    Tensor d_gate = be.empty({c.rows, c.width}, c.dtype, Category::kActivation, "d_gate");
    Tensor d_up = be.empty({c.rows, c.width}, c.dtype, Category::kActivation, "d_up");
    be.swiglu_backward(d_out, gate, up, d_gate, d_up);

    // Loss = sum d_out * silu(gate) * up of the float64 forward; element i of
    // the inputs reaches only term i. h = 1e-4: truncation ~h^2 |f'''| ~1e-8.
    std::vector<double> g = download(gate), u = download(up), d = download(d_out);
    std::vector<double> dg_ref(g.size()), du_ref(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      auto term = [&] { return d[i] * silu(g[i]) * u[i]; };
      dg_ref[i] = central_difference(term, g[i], 1e-4);
      du_ref[i] = central_difference(term, u[i], 1e-4);
    }
    // fp32: a few ulps of fp32 math (~1e-6 relative) plus the FD's ~1e-8;
    // 1e-5 relative and 1e-6 absolute. bf16: plus one rounding, 2^-7.
    double rtol = c.dtype == DType::kF32 ? 1e-5 : std::ldexp(1.0, -7);
    expect_close(download(d_gate), dg_ref, rtol, 1e-6, "d_gate " + c.name());
    expect_close(download(d_up), du_ref, rtol, 1e-6, "d_up " + c.name());
  }
}

// out, d_gate and d_up of swiglu_forward and swiglu_backward on fresh
// (rows, width) tensors of `dtype` holding gate g, up u and d_out d.
std::array<std::vector<double>, 3> forward_and_backward(Backend& be, int64_t rows, int64_t width,
                                                        DType dtype, const std::vector<float>& g,
                                                        const std::vector<float>& u,
                                                        const std::vector<float>& d) {
  Tensor gate = make(be, {rows, width}, dtype, g, "gate");
  Tensor up = make(be, {rows, width}, dtype, u, "up");
  Tensor d_out = make(be, {rows, width}, dtype, d, "d_out");
  Tensor out = be.empty({rows, width}, dtype, Category::kActivation, "out");
  Tensor d_gate = be.empty({rows, width}, dtype, Category::kActivation, "d_gate");
  Tensor d_up = be.empty({rows, width}, dtype, Category::kActivation, "d_up");
  be.swiglu_forward(gate, up, out);
  be.swiglu_backward(d_out, gate, up, d_gate, d_up);
  return {download(out), download(d_gate), download(d_up)};
}

TEST(CpuSwiGlu, OutputsMayBeTheirInputs) {
  // In place (out = gate; d_gate = gate, d_up = up) gives the same bits as
  // separate outputs: every input of element i is read before i is written.
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t rows = 300, width = 130, n = rows * width;
    std::vector<float> g = gates(n, 6), u = random_values(n, 7), d = random_values(n, 8);
    const auto separate = forward_and_backward(be, rows, width, dtype, g, u, d);

    Tensor up = make(be, {rows, width}, dtype, u, "up");
    Tensor d_out = make(be, {rows, width}, dtype, d, "d_out");
    Tensor in_place = make(be, {rows, width}, dtype, g, "gate");
    be.swiglu_forward(in_place, up, in_place);
    EXPECT_EQ(download(in_place), separate[0]) << name_of(dtype);
    Tensor g2 = make(be, {rows, width}, dtype, g, "gate");
    Tensor u2 = make(be, {rows, width}, dtype, u, "up");
    be.swiglu_backward(d_out, g2, u2, g2, u2);
    EXPECT_EQ(download(g2), separate[1]) << name_of(dtype);
    EXPECT_EQ(download(u2), separate[2]) << name_of(dtype);
  }
}

TEST(CpuSwiGlu, Bf16IsTheFp32ResultRoundedOnceOnAnyThreadCount) {
  // The contract "fp32 math, one rounding per output", to the bit: bf16
  // inputs widened and run in fp32, then rounded, give the bf16 outputs.
  // bf16 runs 16 elements at a time in GCC vector types and the rest in the
  // loop that fp32 runs, so this also holds the two to the same operations
  // (a reordered product changes ~1 output in 30 000 after rounding: hence
  // 2^20 elements). Where a thread's part ends, and with it which elements
  // the loop does, moves with the thread count: 1 and 3 threads.
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const int64_t rows = 1024, width = 1025, n = rows * width;  // n / 3 is no multiple of 16
  auto bf16_values = [&](std::vector<float> v) {
    for (float& x : v)
      x = to_float(to_bf16(x));
    return v;
  };
  const std::vector<float> g = bf16_values(gates(n, 16)), u = bf16_values(random_values(n, 17)),
                           d = bf16_values(random_values(n, 18));
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    const auto fp32 = forward_and_backward(be, rows, width, DType::kF32, g, u, d);
    const auto bf16 = forward_and_backward(be, rows, width, DType::kBF16, g, u, d);
    for (int o = 0; o < 3; ++o) {
      int64_t differing = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double rounded = to_float(to_bf16(static_cast<float>(fp32[o][i])));
        differing += std::memcmp(&rounded, &bf16[o][i], sizeof rounded) != 0;
      }
      EXPECT_EQ(differing, 0) << "output " << o << " (out, d_gate, d_up) at " << threads
                              << " threads";
    }
  }
  omp_set_num_threads(saved);
}

// ---- meta = cpu ----

TEST(MetaParity, SwiGlu) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor gate = input(be, {300, 130}, dtype, "block.0.mlp.gate", 1);
      Tensor up = input(be, {300, 130}, dtype, "block.0.mlp.up", 2);
      Tensor act = be.empty({300, 130}, dtype, Category::kActivation, "block.0.mlp.act");
      be.swiglu_forward(gate, up, act);
      Tensor d_gate = be.empty({300, 130}, dtype, Category::kActivation, "d_gate");
      Tensor d_up = be.empty({300, 130}, dtype, Category::kActivation, "d_up");
      be.swiglu_backward(act, gate, up, d_gate, d_up);
      be.swiglu_forward(gate, up, gate);
    }
  });
}

TEST(MetaParity, SwiGluRejectedCallsSayTheSameAndAllocateNothing) {
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor g = be.empty({4, 8}, DType::kBF16, Category::kActivation, "block.3.mlp.gate");
              Tensor u = be.empty({4, 9}, DType::kBF16, Category::kActivation, "block.3.mlp.up");
              Tensor o = be.empty({4, 8}, DType::kBF16, Category::kActivation, "block.3.mlp.act");
              be.swiglu_forward(g, u, o);
            }),
            "swiglu_forward: shape mismatch: gate 'block.3.mlp.gate' bf16 [4, 8] vs up "
            "'block.3.mlp.up' bf16 [4, 9]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor x = be.empty({8, 8}, DType::kF32, Category::kActivation, "x");
              Tensor g = x.rows(0, 4), u = x.rows(4, 8);
              Tensor d = be.empty({4, 8}, DType::kF32, Category::kActivation, "d");
              be.swiglu_backward(d, g, u, d, d);  // d_gate = d_up
            }),
            "swiglu_backward: d_gate 'd' fp32 [4, 8] overlaps d_up 'd' fp32 [4, 8]");
  rejected_alike([](Backend& be) {
    Tensor x = be.empty({8, 8}, DType::kF32, Category::kActivation, "x");
    Tensor g = x.rows(0, 4), u = x.rows(4, 8), shifted = x.rows(2, 6);
    be.swiglu_forward(g, u, shifted);  // partial overlap
  });
  rejected_alike([](Backend& be) {
    Tensor g = be.empty({4, 8}, DType::kF32, Category::kActivation, "g");
    Tensor u = be.empty({4, 8}, DType::kBF16, Category::kActivation, "u");
    Tensor o = be.empty({4, 8}, DType::kF32, Category::kActivation, "o");
    be.swiglu_forward(g, u, o);
  });
}

}  // namespace
}  // namespace headroom::backend_test
