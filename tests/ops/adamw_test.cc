// adamw_update on cpu against a float64 reference of PyTorch's AdamW over
// several steps, fp32 params and bf16 params with an fp32 master; decoupled
// weight decay; grad_scale; meta accepts, rejects and allocates exactly as
// cpu does.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// ---- float64 reference: PyTorch's AdamW (decoupled weight decay) ----

struct State {
  std::vector<double> p, m, v;
};

// One step of torch.optim.AdamW in float64 with the hyperparameters' fp32
// values: p *= 1 - lr*wd, then the bias-corrected Adam step.
void reference_step(State& s, const std::vector<double>& grad, const AdamWParams& h) {
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const double t = static_cast<double>(h.step);
  const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  for (size_t i = 0; i < s.p.size(); ++i) {
    double g = grad[i] * h.grad_scale;
    s.p[i] *= 1 - lr * wd;
    s.m[i] = b1 * s.m[i] + (1 - b1) * g;
    s.v[i] = b2 * s.v[i] + (1 - b2) * g * g;
    s.p[i] -= lr / bc1 * s.m[i] / (std::sqrt(s.v[i]) / std::sqrt(bc2) + eps);
  }
}

struct Config {
  std::string name;
  AdamWParams params;
};

std::vector<Config> configs() {
  AdamWParams base;
  base.lr = 1e-2f;
  base.beta1 = 0.9f;
  base.beta2 = 0.95f;
  base.eps = 1e-8f;
  base.weight_decay = 0.1f;
  base.grad_scale = 0.5f;
  // eps = 0.1 is as large as sqrt(v_hat): where eps sits (inside the sqrt,
  // before or after the bias correction) changes the step by ~10%.
  AdamWParams large_eps = base;
  large_eps.eps = 0.1f;
  // beta1 = 0.3: PyTorch's lerp takes its other branch (weight >= 0.5).
  AdamWParams low_beta1 = base;
  low_beta1.beta1 = 0.3f;
  low_beta1.beta2 = 0.5f;
  low_beta1.grad_scale = 1.0f;
  return {{"base", base}, {"eps 0.1", large_eps}, {"beta1 0.3", low_beta1}};
}

// Tolerances against the float64 reference over 5 steps: each fp32 step
// rounds p, m and v a few times (a few 2^-24 relative each), so m, v and p
// stay within ~1e-6 relative; m can cancel towards 0, hence an absolute part
// of one fp32 ulp at 1. A wrong bias correction, eps placement or weight
// decay moves p by >= 1e-4 (steps are ~1e-2, decay lr*wd*p ~1e-3).
constexpr double kRtol = 2e-6;
constexpr double kAtol = 2e-7;

// ---- tests ----

TEST(CpuAdamW, Fp32MatchesFloat64ReferenceOverSeveralSteps) {
  for (const Config& config : configs()) {
    for (int64_t n : {1, 3, 17, 40000}) {  // 40000: the parallel path
      BackendUnderTest cpu(kCpu);
      Backend& be = *cpu.backend;
      Tensor p = make(be, {n}, DType::kF32, random_values(n, 1), "block.0.flat");
      Tensor m = make(be, {n}, DType::kF32, std::vector<float>(static_cast<size_t>(n), 0), "m");
      Tensor v = make(be, {n}, DType::kF32, std::vector<float>(static_cast<size_t>(n), 0), "v");
      Tensor no_master;
      State ref{download(p), download(m), download(v)};
      for (int64_t step = 1; step <= 5; ++step) {
        Tensor grad = make(be, {n}, DType::kF32, random_values(n, 10 + static_cast<uint64_t>(step)),
                           "block.0.flat.grad");
        AdamWParams h = config.params;
        h.step = step;
        be.adamw_update(p, no_master, grad, m, v, h);
        reference_step(ref, download(grad), h);
        std::string what =
            config.name + ", n " + std::to_string(n) + ", step " + std::to_string(step);
        expect_close(download(m), ref.m, kRtol, kAtol, "m " + what);
        expect_close(download(v), ref.v, kRtol, kAtol, "v " + what);
        expect_close(download(p), ref.p, kRtol, kAtol, "p " + what);
      }
    }
  }
}

TEST(CpuAdamW, Bf16ParamIsTheRoundedFp32Master) {
  for (const Config& config : configs()) {
    for (float lr : {1e-2f, 1e-4f}) {  // 1e-4: steps below half a bf16 ulp of p
      BackendUnderTest cpu(kCpu);
      Backend& be = *cpu.backend;
      const int64_t n = 40000;
      std::vector<float> initial = random_values(n, 2);
      for (float& x : initial)
        x = to_float(to_bf16(x));  // master starts as the bf16 weights, exactly
      Tensor p = make(be, {n}, DType::kBF16, initial, "block.0.flat");
      Tensor master = make(be, {n}, DType::kF32, initial, "block.0.flat.master");
      Tensor m = make(be, {n}, DType::kF32, std::vector<float>(static_cast<size_t>(n), 0), "m");
      Tensor v = make(be, {n}, DType::kF32, std::vector<float>(static_cast<size_t>(n), 0), "v");
      State ref{download(master), download(m), download(v)};
      for (int64_t step = 1; step <= 5; ++step) {
        Tensor grad = make(be, {n}, DType::kBF16,
                           random_values(n, 20 + static_cast<uint64_t>(step)), "block.0.flat.grad");
        AdamWParams h = config.params;
        h.lr = lr;
        h.step = step;
        be.adamw_update(p, master, grad, m, v, h);
        reference_step(ref, download(grad), h);  // the bf16 gradient's exact values
        std::string what =
            config.name + ", lr " + std::to_string(lr) + ", step " + std::to_string(step);
        expect_close(download(master), ref.p, kRtol, kAtol, "master " + what);
        expect_close(download(m), ref.m, kRtol, kAtol, "m " + what);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(p.data<bf16>()[i].bits, to_bf16(master.data<float>()[i]).bits) << what;
        if (step == 1 && lr < 1e-3f) {
          // A first step of ~1e-4 moves every master but leaves most bf16
          // params where they were (their ulp is 2^-9 .. 2^-7): the master is
          // what keeps those steps.
          int64_t masters_moved = 0, params_moved = 0;
          for (int64_t i = 0; i < n; ++i) {
            masters_moved += master.data<float>()[i] != initial[static_cast<size_t>(i)];
            params_moved += to_float(p.data<bf16>()[i]) != initial[static_cast<size_t>(i)];
          }
          EXPECT_EQ(masters_moved, n) << what;
          EXPECT_LT(params_moved, n / 2) << what;
        }
      }
    }
  }
}

TEST(CpuAdamW, Bf16InPlaceRoundsTheFp32UpdateOnceAndLosesSmallSteps) {
  // optimizer.master_dtype = "none": each step is computed in fp32 from the
  // bf16 weight and rounded to nearest once. Against a float64 reference
  // that rounds to bf16 after every step, each weight is the same bf16 value
  // or a neighbour (the fp32 step can round differently at a tie). A bf16
  // master ("bf16") is numerically the same: the identical bits.
  for (float lr : {1e-2f, 1e-4f}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t n = 40000;
    std::vector<float> initial = random_values(n, 2);
    for (float& x : initial)
      x = to_float(to_bf16(x));
    std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    Tensor p = make(be, {n}, DType::kBF16, initial, "block.0.flat");
    Tensor p2 = make(be, {n}, DType::kBF16, initial, "block.0.flat.2");
    Tensor master16 = make(be, {n}, DType::kBF16, initial, "block.0.flat.master");
    Tensor m = make(be, {n}, DType::kF32, zeros, "m"), v = make(be, {n}, DType::kF32, zeros, "v");
    Tensor m2 = make(be, {n}, DType::kF32, zeros, "m2");
    Tensor v2 = make(be, {n}, DType::kF32, zeros, "v2");
    Tensor no_master;
    State ref{download(p), download(m), download(v)};
    int64_t moved = 0;
    for (int64_t step = 1; step <= 5; ++step) {
      Tensor grad = make(be, {n}, DType::kBF16, random_values(n, 20 + static_cast<uint64_t>(step)),
                         "block.0.flat.grad");
      AdamWParams h = configs()[0].params;
      h.lr = lr;
      h.step = step;
      be.adamw_update(p, no_master, grad, m, v, h);
      be.adamw_update(p2, master16, grad, m2, v2, h);
      reference_step(ref, download(grad), h);
      for (double& x : ref.p)
        x = to_float(to_bf16(static_cast<float>(x)));
      const std::string what = "lr " + std::to_string(lr) + ", step " + std::to_string(step);
      expect_close(download(m), ref.m, kRtol, kAtol, "m " + what);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t got = p.data<bf16>()[i].bits;
        const uint16_t want = to_bf16(static_cast<float>(ref.p[static_cast<size_t>(i)])).bits;
        ASSERT_LE(std::abs(static_cast<int>(got) - static_cast<int>(want)), 1)
            << what << " [" << i << "]";
        ASSERT_EQ(got, p2.data<bf16>()[i].bits) << what;
        ASSERT_EQ(got, master16.data<bf16>()[i].bits) << what;
      }
      if (step == 1)
        for (int64_t i = 0; i < n; ++i)
          moved += to_float(p.data<bf16>()[i]) != initial[static_cast<size_t>(i)];
    }
    // ~1e-4 is below half a bf16 ulp of these weights (2^-9 .. 2^-7): most
    // first steps are rounded away, which an fp32 master would have kept.
    if (lr < 1e-3f) {
      EXPECT_LT(moved, n / 2);
    } else {
      EXPECT_GT(moved, n / 2);
    }
  }
}

TEST(CpuAdamW, ZeroGradientStepStillDecaysTheWeights) {
  // Decoupled: with g = 0 and fresh m = v = 0 the Adam step is 0 / (0 + eps)
  // = 0 and only p *= 1 - lr*wd remains. (L2 regularization would put wd*p
  // into the gradient, and Adam would normalize it into a step of ~lr.)
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t n = 17;
    std::vector<float> initial = random_values(n, 3);
    std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    Tensor p = make(be, {n}, DType::kF32, initial, "p");
    Tensor p16 = make(be, {n}, DType::kBF16, initial, "p16");
    Tensor master = make(be, {n}, DType::kF32, initial, "master");
    Tensor m = make(be, {n}, DType::kF32, zeros, "m");
    Tensor v = make(be, {n}, DType::kF32, zeros, "v");
    Tensor grad = make(be, {n}, dtype, zeros, "grad");
    AdamWParams h;
    h.lr = 1e-2f;
    h.weight_decay = 0.1f;
    Tensor no_master;
    if (dtype == DType::kF32)
      be.adamw_update(p, no_master, grad, m, v, h);
    else
      be.adamw_update(p16, master, grad, m, v, h);
    const float decay = static_cast<float>(1.0 - 1e-2f * static_cast<double>(0.1f));
    const float* updated = dtype == DType::kF32 ? p.data<float>() : master.data<float>();
    for (size_t i = 0; i < initial.size(); ++i) {
      EXPECT_EQ(updated[i], initial[i] * decay) << name_of(dtype) << " [" << i << "]";
      EXPECT_EQ(m.data<float>()[i], 0.0f);
      EXPECT_EQ(v.data<float>()[i], 0.0f);
    }
  }
}

TEST(CpuAdamW, GradScaleMultipliesTheGradientFirst) {
  // grad_scale 0.5 on 2g is g exactly (powers of two): the same bits as g.
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  const int64_t n = 1031;
  std::vector<float> g = random_values(n, 4), twice = g;
  for (float& x : twice)
    x *= 2.0f;
  std::vector<float> initial = random_values(n, 5), zeros(static_cast<size_t>(n), 0.0f);
  Tensor no_master;
  std::vector<std::vector<double>> results;
  for (float scale : {1.0f, 0.5f}) {
    Tensor p = make(be, {n}, DType::kF32, initial, "p");
    Tensor m = make(be, {n}, DType::kF32, zeros, "m");
    Tensor v = make(be, {n}, DType::kF32, zeros, "v");
    Tensor grad = make(be, {n}, DType::kF32, scale == 1.0f ? g : twice, "grad");
    AdamWParams h;
    h.lr = 1e-2f;
    h.weight_decay = 0.1f;
    h.grad_scale = scale;
    be.adamw_update(p, no_master, grad, m, v, h);
    results.push_back(download(p));
  }
  EXPECT_EQ(results[0], results[1]);
}

// ---- meta = cpu ----

TEST(MetaParity, AdamW) {
  expect_same_events([](Backend& be) {
    AdamWParams h;
    h.lr = 1e-3f;
    h.weight_decay = 0.1f;
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor p = input(be, {40000}, dtype, "block.0.flat", 1);
      Tensor grad = input(be, {40000}, dtype, "block.0.flat.grad", 2);
      Tensor m = be.empty({40000}, DType::kF32, Category::kOptim, "block.0.adam.m");
      Tensor v = be.empty({40000}, DType::kF32, Category::kOptim, "block.0.adam.v");
      be.fill(m, 0.0f);
      be.fill(v, 0.0f);
      Tensor master;
      if (dtype == DType::kBF16) {
        master = be.cast(p, DType::kF32, Category::kOptim, "block.0.master");
      }
      be.adamw_update(p, master, grad, m, v, h);
    }
  });
}

TEST(MetaParity, AdamWRejectedCallsSayTheSameAndAllocateNothing) {
  auto state = [](Backend& be, DType dtype, int64_t n, int64_t n_grad) {
    struct S {
      Tensor p, master, grad, m, v;
    } s;
    s.p = be.empty({n}, dtype, Category::kParam, "block.1.flat");
    s.grad = be.empty({n_grad}, dtype, Category::kGrad, "block.1.flat.grad");
    s.m = be.empty({n}, DType::kF32, Category::kOptim, "block.1.adam.m");
    s.v = be.empty({n}, DType::kF32, Category::kOptim, "block.1.adam.v");
    return s;
  };
  EXPECT_EQ(rejected_alike([&](Backend& be) {
              auto s = state(be, DType::kF32, 8, 9);
              be.adamw_update(s.p, s.master, s.grad, s.m, s.v, AdamWParams{});
            }),
            "adamw_update: shape mismatch: grad 'block.1.flat.grad' fp32 [9] vs param "
            "'block.1.flat' fp32 [8]");
  EXPECT_EQ(rejected_alike([&](Backend& be) {
              auto s = state(be, DType::kBF16, 8, 8);
              s.master = be.empty({9}, DType::kF32, Category::kOptim, "block.1.master");
              be.adamw_update(s.p, s.master, s.grad, s.m, s.v, AdamWParams{});
            }),
            "adamw_update: shape mismatch: master 'block.1.master' fp32 [9] vs param "
            "'block.1.flat' bf16 [8]");
  EXPECT_EQ(rejected_alike([&](Backend& be) {
              auto s = state(be, DType::kF32, 8, 8);
              s.master = be.empty({8}, DType::kF32, Category::kOptim, "block.1.master");
              be.adamw_update(s.p, s.master, s.grad, s.m, s.v, AdamWParams{});
            }),
            "adamw_update: param 'block.1.flat' fp32 [8] is fp32 and is its own master, but "
            "master 'block.1.master' fp32 [8] was given");
  EXPECT_EQ(rejected_alike([&](Backend& be) {
              auto s = state(be, DType::kBF16, 8, 8);
              s.master = be.empty({8}, DType::kF32, Category::kOptim, "block.1.master");
              AdamWParams h;
              h.step = 0;
              be.adamw_update(s.p, s.master, s.grad, s.m, s.v, h);
            }),
            "adamw_update: step 0 must be >= 1 (param 'block.1.flat' bf16 [8])");
  rejected_alike([&](Backend& be) {
    auto s = state(be, DType::kBF16, 8, 8);
    s.master = be.empty({8}, DType::kI32, Category::kOptim, "block.1.master");
    be.adamw_update(s.p, s.master, s.grad, s.m, s.v, AdamWParams{});
  });
  rejected_alike([&](Backend& be) {
    auto s = state(be, DType::kBF16, 8, 8);
    be.adamw_update(s.p, s.p, s.grad, s.m, s.v, AdamWParams{});  // master = param
  });
  rejected_alike([&](Backend& be) {
    auto s = state(be, DType::kF32, 8, 8);
    AdamWParams h;
    h.beta2 = 1.0f;
    be.adamw_update(s.p, s.master, s.grad, s.m, s.v, h);
  });
  rejected_alike([&](Backend& be) {
    auto s = state(be, DType::kF32, 8, 8);
    be.adamw_update(s.p, s.master, s.grad, s.m, s.m, AdamWParams{});  // v = m
  });
  rejected_alike([&](Backend& be) {
    auto s = state(be, DType::kF32, 8, 8);
    s.m = be.empty({8}, DType::kBF16, Category::kOptim, "block.1.adam.m");
    be.adamw_update(s.p, s.master, s.grad, s.m, s.v, AdamWParams{});
  });
}

}  // namespace
}  // namespace headroom::backend_test
