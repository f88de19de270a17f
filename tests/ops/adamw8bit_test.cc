// adamw8bit_update and bitsandbytes' dynamic maps on cpu: the maps against
// their definition in float64, quantization against a nearest-value search,
// a few steps that track fp32 AdamW, determinism over thread counts, and
// meta making exactly cpu's allocations (none) and refusals.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/common/dynamic_map.h"
#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// create_dynamic_map(signed) from its definition, in float64.
std::vector<double> reference_map(bool is_signed) {
  std::vector<double> data;
  for (int i = 0; i < 7; ++i) {
    const int n = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    for (int j = 0; j + 1 < n; ++j) {
      const double lo = 0.1 + 0.9 * j / (n - 1), hi = 0.1 + 0.9 * (j + 1) / (n - 1);
      data.push_back(std::pow(10.0, i - 6) * (lo + hi) / 2);
      if (is_signed) data.push_back(-data.back());
    }
  }
  data.push_back(0);
  data.push_back(1);
  std::sort(data.begin(), data.end());
  return data;
}

TEST(DynamicMap, IsBitsandbytesCreateDynamicMap) {
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& map = dynamic_map(is_signed);
    const std::vector<double> ref = reference_map(is_signed);
    ASSERT_EQ(ref.size(), 256u);
    for (size_t c = 0; c < 256; ++c)
      EXPECT_NEAR(map[c], ref[c], 5e-7 * std::fabs(ref[c])) << is_signed << " code " << c;
    EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  }
  // The shape the optimizer relies on: signed spans [-0.99, 1] with 0 in it,
  // unsigned [0, 1]; the smallest nonzero magnitudes are 10^-6 * 0.55
  // (signed) and 10^-6 * 0.325 (unsigned).
  EXPECT_EQ(dynamic_map(false)[0], 0.0f);
  EXPECT_EQ(dynamic_map(true)[255], 1.0f);
  EXPECT_NEAR(dynamic_map(true)[0], -0.9929687, 1e-6);
  EXPECT_NEAR(dynamic_map(false)[1], 3.25e-7, 1e-12);
  EXPECT_NEAR(dynamic_map(true)[128], 5.5e-7, 1e-12);
  EXPECT_EQ(dynamic_map(true)[127], 0.0f);
}

TEST(DynamicMap, QuantizeIsTheNearestCodeAndKeepsTheSign) {
  std::vector<float> xs = random_values(20000, 9);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] *= static_cast<float>(std::pow(10.0, -static_cast<double>(i % 8)));  // 1 .. 1e-7
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& map = dynamic_map(is_signed);
    double worst = 0;
    for (float raw : xs) {
      const float x = is_signed ? raw : std::fabs(raw);
      const uint8_t code = quantize_to_map(map, is_signed, x);
      size_t nearest = 0;
      for (size_t c = 1; c < 256; ++c)
        if (std::fabs(map[c] - x) < std::fabs(map[nearest] - x)) nearest = c;
      if (is_signed && std::signbit(map[nearest]) != std::signbit(x))
        nearest += x > 0 ? 1 : -1;  // bitsandbytes' sign rule
      ASSERT_EQ(code, nearest) << "x " << x;
      if (std::fabs(x) >= 0.1f)
        worst = std::max(worst, static_cast<double>(std::fabs(map[code] - x)));
    }
    // In the top decade (|x| >= 0.1 of the block's absmax, where the large
    // moments lie) the values are 0.9 / 64 (signed) or 0.9 / 128 (unsigned)
    // apart: at most half that away.
    EXPECT_LE(worst, (is_signed ? 0.9 / 64 : 0.9 / 128) / 2 + 1e-6) << is_signed;
  }
}

// quantize_to_map as std::lower_bound and branches: the form it had before
// it became branch-free (dynamic_map.h), kept here as its definition.
uint8_t quantize_by_lower_bound(const std::array<float, 256>& map, bool is_signed, float x) {
  const auto it = std::lower_bound(map.begin(), map.end(), x);
  int code;
  if (it == map.begin()) {
    code = 0;
  } else if (it == map.end()) {
    code = 255;
  } else {
    const int upper = static_cast<int>(it - map.begin());
    code = x - map[static_cast<size_t>(upper - 1)] <= map[static_cast<size_t>(upper)] - x
               ? upper - 1
               : upper;
  }
  if (is_signed) {
    const float q = map[static_cast<size_t>(code)];
    if (x > 0 && q < 0) ++code;
    if (x < 0 && q >= 0) --code;
  }
  return static_cast<uint8_t>(code);
}

// Where a search can go wrong: every value of the map, the floats either
// side of it, each midpoint between neighbours (the ties) and the floats
// either side of that, the ends and past them, zeros, infinities and NaN.
TEST(DynamicMap, BranchFreeQuantizeAgreesWithLowerBoundAtEveryEdge) {
  const float inf = std::numeric_limits<float>::infinity();
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& map = dynamic_map(is_signed);
    std::vector<float> xs = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             1.5f,
                             -1.5f,
                             inf,
                             -inf,
                             std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::denorm_min(),
                             -std::numeric_limits<float>::denorm_min()};
    for (size_t c = 0; c < 256; ++c) {
      for (float x : {map[c], -map[c]})
        xs.insert(xs.end(), {x, std::nextafter(x, inf), std::nextafter(x, -inf)});
      if (c + 1 < 256) {
        const float mid = (map[c] + map[c + 1]) / 2;
        xs.insert(xs.end(), {mid, std::nextafter(mid, inf), std::nextafter(mid, -inf)});
      }
    }
    for (float x : xs)
      ASSERT_EQ(quantize_to_map(map, is_signed, x), quantize_by_lower_bound(map, is_signed, x))
          << "x " << x << (is_signed ? " (signed)" : " (unsigned)");
  }
}

// fp32 AdamW and 8-bit AdamW from the same start over the same gradients.
struct Track {
  std::vector<double> p32, p8, start;
};

Track track(int64_t n, int steps, float lr, float weight_decay) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const int64_t blocks = (n + 255) / 256;
  std::vector<float> initial = random_values(n, 1), zeros(static_cast<size_t>(n), 0.0f);
  Tensor p32 = make(be, {n}, DType::kF32, initial, "p32");
  Tensor p8 = make(be, {n}, DType::kF32, initial, "p8");
  Tensor m = make(be, {n}, DType::kF32, zeros, "m"), v = make(be, {n}, DType::kF32, zeros, "v");
  Tensor m8 = be.empty({n}, DType::kU8, Category::kOptim, "m8");
  Tensor v8 = be.empty({n}, DType::kU8, Category::kOptim, "v8");
  Tensor ma = be.empty({blocks}, DType::kF32, Category::kOptim, "m8.absmax");
  Tensor va = be.empty({blocks}, DType::kF32, Category::kOptim, "v8.absmax");
  for (Tensor* t : {&m8, &v8, &ma, &va})
    be.fill(*t, 0.0f);
  Tensor none;
  for (int step = 1; step <= steps; ++step) {
    // Gradients with a persistent direction plus noise, as a loss surface has.
    std::vector<float> g = random_values(n, 1000 + static_cast<uint64_t>(step));
    const std::vector<float> drift = random_values(n, 7);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = 0.5f * g[i] + drift[i];
    Tensor grad = make(be, {n}, DType::kF32, g, "grad");
    AdamWParams h;
    h.lr = lr;
    h.weight_decay = weight_decay;
    h.beta2 = 0.999f;
    h.step = step;
    be.adamw_update(p32, none, grad, m, v, h);
    be.adamw8bit_update(p8, none, grad, m8, v8, ma, va, h);
  }
  Track t;
  t.p32 = download(p32);
  t.p8 = download(p8);
  t.start.assign(initial.begin(), initial.end());
  return t;
}

TEST(CpuAdamW8bit, TracksFp32AdamWOverSteps) {
  // The 8-bit moments are within a few percent of the fp32 ones, so the
  // parameters' movement over 100 steps differs by a few percent of itself.
  // A wrong map, block or bias correction is off by O(1).
  const Track t = track(4096 + 300, 100, 1e-3f, 0.1f);
  double moved = 0, apart = 0;
  for (size_t i = 0; i < t.p32.size(); ++i) {
    moved += (t.p32[i] - t.start[i]) * (t.p32[i] - t.start[i]);
    apart += (t.p8[i] - t.p32[i]) * (t.p8[i] - t.p32[i]);
  }
  const double relative = std::sqrt(apart / moved);
  RecordProperty("relative_difference", std::to_string(relative));
  EXPECT_LT(relative, 0.05);
  EXPECT_GT(relative, 0.0) << "8-bit moments are not exact";
}

TEST(CpuAdamW8bit, DeterministicForAnyThreadCount) {
  const int64_t n = 40000;  // the parallel path
  const int64_t blocks = (n + 255) / 256;
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  Tensor p = be.empty({n}, DType::kBF16, Category::kParam, "p");
  Tensor grad = make(be, {n}, DType::kBF16, random_values(n, 2), "grad");
  Tensor m = be.empty({n}, DType::kU8, Category::kOptim, "m8");
  Tensor v = be.empty({n}, DType::kU8, Category::kOptim, "v8");
  Tensor ma = be.empty({blocks}, DType::kF32, Category::kOptim, "ma");
  Tensor va = be.empty({blocks}, DType::kF32, Category::kOptim, "va");
  Tensor none;
  std::vector<bf16> initial(static_cast<size_t>(n));
  const std::vector<float> values = random_values(n, 3);
  for (size_t i = 0; i < initial.size(); ++i)
    initial[i] = to_bf16(values[i]);
  auto reset = [&] {
    be.copy_from_host(initial.data(), p);
    for (Tensor* t : {&m, &v, &ma, &va})
      be.fill(*t, 0.0f);
  };
  // Three steps: the parameters then depend on the codes and absmax of the
  // first two.
  auto op = [&] {
    for (int64_t step = 1; step <= 3; ++step) {
      AdamWParams h;
      h.lr = 1e-2f;
      h.step = step;
      be.adamw8bit_update(p, none, grad, m, v, ma, va, h);
    }
  };
  const auto results = bytes_per_thread_count(reset, op, p);
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(results[i], results[0]) << "thread count " << i + 1;
}

TEST(MetaParity, AdamW8bit) {
  expect_same_events([](Backend& be) {
    AdamWParams h;
    h.lr = 1e-3f;
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const int64_t n = 40000, blocks = (n + 255) / 256;
      Tensor p = input(be, {n}, dtype, "block.0.flat", 1);
      Tensor grad = input(be, {n}, dtype, "block.0.flat.grad", 2);
      Tensor m = be.empty({n}, DType::kU8, Category::kOptim, "block.0.adam_m8");
      Tensor v = be.empty({n}, DType::kU8, Category::kOptim, "block.0.adam_v8");
      Tensor ma = be.empty({blocks}, DType::kF32, Category::kOptim, "block.0.adam_m8.absmax");
      Tensor va = be.empty({blocks}, DType::kF32, Category::kOptim, "block.0.adam_v8.absmax");
      for (Tensor* t : {&m, &v, &ma, &va})
        be.fill(*t, 0.0f);
      Tensor none;
      be.adamw8bit_update(p, none, grad, m, v, ma, va, h);
    }
  });
}

TEST(MetaParity, AdamW8bitRejectedCallsSayTheSame) {
  auto call = [](Backend& be, int64_t blocks, DType codes) {
    Tensor p = be.empty({300}, DType::kF32, Category::kParam, "block.1.flat");
    Tensor grad = be.empty({300}, DType::kF32, Category::kGrad, "block.1.flat.grad");
    Tensor m = be.empty({300}, codes, Category::kOptim, "block.1.adam_m8");
    Tensor v = be.empty({300}, DType::kU8, Category::kOptim, "block.1.adam_v8");
    Tensor ma = be.empty({blocks}, DType::kF32, Category::kOptim, "block.1.adam_m8.absmax");
    Tensor va = be.empty({2}, DType::kF32, Category::kOptim, "block.1.adam_v8.absmax");
    Tensor none;
    be.adamw8bit_update(p, none, grad, m, v, ma, va, AdamWParams{});
  };
  EXPECT_EQ(rejected_alike([&](Backend& be) { call(be, 1, DType::kU8); }),
            "adamw8bit_update: m_absmax 'block.1.adam_m8.absmax' fp32 [1] must hold 2 blocks of "
            "256 for param 'block.1.flat' fp32 [300]");
  rejected_alike([&](Backend& be) { call(be, 2, DType::kF32); });
}

}  // namespace
}  // namespace headroom::backend_test
