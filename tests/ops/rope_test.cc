// rope_forward / rope_backward on cpu against a float64 reference of the
// Hugging Face rotate_half convention and central finite differences of it,
// fp32 and bf16, head_dim 2, 8, 64 and 1 or 3 heads; meta accepts, rejects and
// allocates exactly as cpu does.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// ---- float64 reference ----

// The angle recipe of Hugging Face's LlamaRotaryEmbedding, which the op
// reproduces (cpu/rope.cc): inv_freq = 1 / theta^(float(2i) / D) with each
// step in fp32 (the power correctly rounded), angle = float(position) *
// inv_freq rounded to fp32. Everything after the angle is float64 here.
float hf_angle(int32_t position, int64_t i, int64_t head_dim, float theta) {
  float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  auto power =
      static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
  return static_cast<float>(position) * (1.0f / power);
}

// x (T, n * D) rotated in float64; sign -1 gives the transpose.
std::vector<double> reference_rope(std::vector<double> x, const std::vector<int32_t>& positions,
                                   int64_t width, int64_t head_dim, float theta, double sign) {
  int64_t half = head_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t)
    for (int64_t h = 0; h < width / head_dim; ++h)
      for (int64_t i = 0; i < half; ++i) {
        double angle = hf_angle(positions[t], i, head_dim, theta);
        double c = std::cos(angle), s = sign * std::sin(angle);
        double& a = x[t * static_cast<size_t>(width) + static_cast<size_t>(h * head_dim + i)];
        double& b =
            x[t * static_cast<size_t>(width) + static_cast<size_t>(h * head_dim + i + half)];
        double a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = b0 * c + a0 * s;
      }
  return x;
}

// Positions 0, 1, 2 (where an off-by-one shows) and then large ones, where
// the fp32 angle is coarse (ulp 2^-8 rad at 32768).
std::vector<int32_t> test_positions(int64_t tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t)
    p[static_cast<size_t>(t)] =
        t < 3 ? static_cast<int32_t>(t) : static_cast<int32_t>(rng() % 40000);
  return p;
}

Tensor make_positions(Backend& be, const std::vector<int32_t>& values) {
  Tensor t = be.empty({static_cast<int64_t>(values.size())}, DType::kI32, Category::kActivation,
                      "batch.positions");
  be.copy_from_host(values.data(), t);
  return t;
}

struct Case {
  int64_t tokens, heads, head_dim;
  DType dtype;
  std::string name() const {
    return "T " + std::to_string(tokens) + ", " + std::to_string(heads) + " x D " +
           std::to_string(head_dim) + " " + std::string(name_of(dtype));
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t tokens : {1, 3, 17, 300})  // 300 x 3 x 64: the parallel path
    for (int64_t heads : {1, 3})
      for (int64_t head_dim : {2, 8, 64})
        for (DType dtype : {DType::kF32, DType::kBF16})
          all.push_back({tokens, heads, head_dim, dtype});
  return all;
}

// fp32: cos/sin rounded to fp32 and two fp32 products and a sum, a few ulps
// of |a| + |b| <= 2 (~5e-7); 1e-6 leaves margin. bf16: plus one rounding of
// the result, at most 2^-8 relative (8 significant bits), so 2^-7. A wrong pairing, sign or
// frequency is off by O(1).
double rtol_of(DType dtype) {
  return dtype == DType::kF32 ? 1e-6 : std::ldexp(1.0, -7);
}

// ---- tests ----

TEST(CpuRope, PairsIWithIPlusHalfAndUsesThetaPowers) {
  // D = 4, theta = 10000: inv_freq = {1, 10000^(-1/2) = 0.01}. x = e_0 in
  // each head rotates in the (0, 2) plane by p rad; e_1 in the (1, 3) plane
  // by 0.01 p rad. An interleaved (GPT-J) pairing would move e_0 into 1.
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  std::vector<int32_t> positions = {0, 1, 7};
  std::vector<float> x = {1, 0, 0, 0, 0, 1, 0, 0,  //
                          1, 0, 0, 0, 0, 1, 0, 0,  //
                          1, 0, 0, 0, 0, 1, 0, 0};
  Tensor t = make(be, {3, 8}, DType::kF32, x, "q");
  be.rope_forward(t, make_positions(be, positions), 4, 10000.0f);
  std::vector<double> expected;
  for (double p : {0.0, 1.0, 7.0})
    for (double v : {std::cos(p), 0.0, std::sin(p), 0.0,  //
                     0.0, std::cos(0.01 * p), 0.0, std::sin(0.01 * p)})
      expected.push_back(v);
  expect_close(download(t), expected, 0, 1e-6, "rotated unit vectors");
}

TEST(CpuRope, ForwardMatchesFloat64Reference) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t width = c.heads * c.head_dim;
    std::vector<int32_t> positions = test_positions(c.tokens, 1);
    Tensor x = make(be, {c.tokens, width}, c.dtype, random_values(c.tokens * width, 2), "q");
    std::vector<double> before = download(x);
    be.rope_forward(x, make_positions(be, positions), c.head_dim, 1e6f);
    expect_close(download(x), reference_rope(before, positions, width, c.head_dim, 1e6f, 1.0),
                 rtol_of(c.dtype), 1e-6, "rope_forward " + c.name());
  }
}

TEST(CpuRope, AnglesAreHuggingFacesFp32Angles) {
  // At position 30011 the fp32 angle position * inv_freq differs from the
  // exact one by up to ~1e-3 rad: the op must follow the fp32 recipe (what a
  // Hugging Face checkpoint was run with), not the better double angle.
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const int64_t head_dim = 128;
  std::vector<int32_t> positions = {30011};
  std::vector<float> ones(head_dim, 1.0f);
  Tensor x = make(be, {1, head_dim}, DType::kF32, ones, "k");
  be.rope_forward(x, make_positions(be, positions), head_dim, 10000.0f);
  std::vector<double> actual = download(x);
  std::vector<double> ones_d(head_dim, 1.0);
  expect_close(actual, reference_rope(ones_d, positions, head_dim, head_dim, 10000.0f, 1.0), 0,
               1e-6, "fp32 angles");
  double largest_gap = 0;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double exact = 30011.0 * std::pow(10000.0, -2.0 * static_cast<double>(i) / head_dim);
    double expected = std::cos(exact) - std::sin(exact);
    largest_gap = std::max(largest_gap, std::fabs(actual[static_cast<size_t>(i)] - expected));
  }
  EXPECT_GT(largest_gap, 1e-4) << "the op matches double-precision angles, not HF's fp32 ones";
}

TEST(CpuRope, BackwardMatchesFiniteDifferencesAndInvertsForward) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t width = c.heads * c.head_dim, D = c.head_dim;
    std::vector<int32_t> positions = test_positions(c.tokens, 3);
    Tensor pos = make_positions(be, positions);
    Tensor dy = make(be, {c.tokens, width}, c.dtype, random_values(c.tokens * width, 4), "dq");
    std::vector<double> g = download(dy);
    be.rope_backward(dy, pos, D, 1e6f);

    // Loss = sum g * rope(x) of the float64 forward, at any x (it is linear;
    // central differences with h = 0.5 are exact up to rounding). x[t, h, :]
    // only reaches outputs of the same (t, h), so one head is recomputed.
    std::vector<double> expected(g.size());
    std::vector<double> head(static_cast<size_t>(D), 0.25);
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t h = 0; h < c.heads; ++h) {
        size_t base = static_cast<size_t>(t * width + h * D);
        auto loss = [&] {
          std::vector<double> y =
              reference_rope(head, {positions[static_cast<size_t>(t)]}, D, D, 1e6f, 1.0);
          double l = 0;
          for (int64_t i = 0; i < D; ++i)
            l += g[base + static_cast<size_t>(i)] * y[static_cast<size_t>(i)];
          return l;
        };
        for (int64_t i = 0; i < D; ++i)
          expected[base + static_cast<size_t>(i)] =
              central_difference(loss, head[static_cast<size_t>(i)], 0.5);
      }
    expect_close(download(dy), expected, rtol_of(c.dtype), 1e-6, "rope_backward " + c.name());

    // Backward is the inverse rotation: backward(forward(x)) = x up to the
    // roundings of two passes. bf16 (8 significant bits): forward's rounding
    // moves a pair of norm <= sqrt(2) by at most 2^-8 * sqrt(2) (as a pair
    // norm), which the inverse rotation carries over unchanged; the second
    // rounding adds 2^-8 |x| <= 2^-8. 2^-8 * 2.42 < 2^-6 absolute. fp32: the
    // same argument at 2^-24, covered by 2e-6.
    std::vector<float> xs = random_values(c.tokens * width, 5);
    Tensor x = make(be, {c.tokens, width}, c.dtype, xs, "q");
    std::vector<double> original = download(x);
    be.rope_forward(x, pos, D, 1e6f);
    be.rope_backward(x, pos, D, 1e6f);
    double atol = c.dtype == DType::kF32 ? 2e-6 : std::ldexp(1.0, -6);
    expect_close(download(x), original, 0, atol, "round trip " + c.name());
  }
}

// ---- meta = cpu ----

TEST(MetaParity, Rope) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor q = input(be, {300, 3 * 64}, dtype, "block.0.attn.q", 1);
      Tensor positions = be.empty({300}, DType::kI32, Category::kActivation, "batch.positions");
      be.fill(positions, 5.0f);
      be.rope_forward(q, positions, 64, 1e6f);
      be.rope_backward(q, positions, 64, 1e6f);
    }
  });
}

TEST(MetaParity, RopeRejectedCallsSayTheSameAndAllocateNothing) {
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor q = be.empty({4, 24}, DType::kBF16, Category::kActivation, "block.1.attn.q");
              Tensor p = be.empty({5}, DType::kI32, Category::kActivation, "batch.positions");
              be.rope_forward(q, p, 8, 1e4f);
            }),
            "rope_forward: shape mismatch: positions 'batch.positions' int32 [5] vs x "
            "'block.1.attn.q' bf16 [4, 24]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor q = be.empty({4, 24}, DType::kBF16, Category::kActivation, "block.1.attn.q");
              Tensor p = be.empty({4}, DType::kI32, Category::kActivation, "batch.positions");
              be.rope_backward(q, p, 16, 1e4f);
            }),
            "rope_backward: head_dim 16 must be even, > 0 and divide the width of x "
            "'block.1.attn.q' bf16 [4, 24]");
  rejected_alike([](Backend& be) {
    Tensor q = be.empty({4, 9}, DType::kF32, Category::kActivation, "q");
    Tensor p = be.empty({4}, DType::kI32, Category::kActivation, "p");
    be.rope_forward(q, p, 3, 1e4f);  // odd head_dim
  });
  rejected_alike([](Backend& be) {
    Tensor q = be.empty({4, 8}, DType::kF32, Category::kActivation, "q");
    Tensor p = be.empty({4}, DType::kI64, Category::kActivation, "p");
    be.rope_forward(q, p, 8, 1e4f);
  });
  rejected_alike([](Backend& be) {
    Tensor q = be.empty({4, 8}, DType::kF32, Category::kActivation, "q");
    Tensor p = be.empty({4}, DType::kI32, Category::kActivation, "p");
    be.rope_forward(q, p, 8, 0.0f);
  });
}

}  // namespace
}  // namespace headroom::backend_test
