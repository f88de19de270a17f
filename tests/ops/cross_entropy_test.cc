// cross_entropy_forward / cross_entropy_backward on cpu against a float64
// reference (lse, loss, the analytic gradient) and against central finite
// differences of that reference loss; bit-identical results on 1 and many
// threads; meta accepts, rejects and allocates exactly as cpu does.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// Logits spread over about [-3, 3]: a softmax far from uniform and far from
// one-hot, so neither a missing max-subtract nor a wrong target term hides.
std::vector<float> random_logits(int64_t n, uint64_t seed) {
  std::vector<float> v = random_values(n, seed);
  for (float& x : v)
    x *= 3.0f;
  return v;
}

// Targets in [0, V), with every third row (from `first_ignored`) set to -1.
std::vector<int32_t> random_targets(int64_t rows, int64_t vocab, uint64_t seed,
                                    int64_t first_ignored = 1) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    t[static_cast<size_t>(i)] = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  for (int64_t i = first_ignored; i < rows; i += 3)
    t[static_cast<size_t>(i)] = -1;
  return t;
}

void upload_targets(Tensor& t, const std::vector<int32_t>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::copy(values.begin(), values.end(), t.data<int32_t>());
}

// log(sum exp) of one row, float64, max-subtracted.
double reference_lse(const double* x, int64_t vocab) {
  double max = *std::max_element(x, x + vocab);
  double sum = 0;
  for (int64_t j = 0; j < vocab; ++j)
    sum += std::exp(x[j] - max);
  return max + std::log(sum);
}

// Summed loss over counted rows, float64.
double reference_loss(const std::vector<double>& x, const std::vector<int32_t>& target,
                      int64_t vocab) {
  double loss = 0;
  for (size_t i = 0; i < target.size(); ++i)
    if (target[i] >= 0)
      loss += reference_lse(&x[i * static_cast<size_t>(vocab)], vocab) -
              x[i * static_cast<size_t>(vocab) + static_cast<size_t>(target[i])];
  return loss;
}

// scale * (softmax - onehot), 0 on ignored rows, float64.
std::vector<double> reference_grad(const std::vector<double>& x, const std::vector<int32_t>& target,
                                   int64_t vocab, double scale) {
  std::vector<double> g(x.size(), 0.0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] < 0) continue;
    const double* row = &x[i * static_cast<size_t>(vocab)];
    double lse = reference_lse(row, vocab);
    for (int64_t j = 0; j < vocab; ++j)
      g[i * static_cast<size_t>(vocab) + static_cast<size_t>(j)] =
          scale * (std::exp(row[j] - lse) - (j == target[i] ? 1.0 : 0.0));
  }
  return g;
}

// One forward and one backward on cpu: the inputs as the op saw them (bf16
// rounded), what it wrote, and the dlogits backward left in place.
struct Outcome {
  std::vector<double> logits;
  std::vector<double> lse;
  double loss_sum = 0;
  std::vector<double> dlogits;
  std::vector<uint8_t> lse_bits, loss_bits, dlogits_bits;  // for bit-exact comparisons
};

constexpr float kInitialLossSum = 0.75f;  // loss_sum is accumulated, not written

Outcome run_cpu(Backend& be, int64_t rows, int64_t vocab, DType dtype,
                const std::vector<int32_t>& target_values, float scale, uint64_t seed) {
  Outcome run;
  Tensor logits = be.empty({rows, vocab}, dtype, Category::kLogits, "loss.chunk.0.logits");
  upload(logits, random_logits(rows * vocab, seed));
  Tensor targets = be.empty({rows}, DType::kI32, Category::kActivation, "loss.targets");
  upload_targets(targets, target_values);
  Tensor lse = be.empty({rows}, DType::kF32, Category::kActivation, "loss.lse");
  Tensor loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss.sum");
  be.fill(loss_sum, kInitialLossSum);
  run.logits = download(logits);

  uint64_t allocs = be.allocator().stats().num_allocs;
  be.cross_entropy_forward(logits, targets, lse, loss_sum);
  be.cross_entropy_backward(logits, targets, lse, scale);
  EXPECT_EQ(be.allocator().stats().num_allocs, allocs) << "the ops allocate nothing";

  run.lse = download(lse);
  run.loss_sum = download(loss_sum)[0];
  run.dlogits = download(logits);
  auto bytes = [](const Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    return std::vector<uint8_t>(p, p + t.nbytes());
  };
  run.lse_bits = bytes(lse);
  run.loss_bits = bytes(loss_sum);
  run.dlogits_bits = bytes(logits);
  return run;
}

struct Case {
  int64_t rows, vocab;
  DType dtype;
};

std::vector<Case> awkward_cases() {
  std::vector<Case> cases;
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (int64_t rows : {1, 3, 17})
      for (int64_t vocab : {1, 3, 17, 1000})
        cases.push_back({rows, vocab, dtype});
  return cases;
}

std::string name(const Case& c) {
  return std::string(name_of(c.dtype)) + " [" + std::to_string(c.rows) + ", " +
         std::to_string(c.vocab) + "]";
}

TEST(CpuCrossEntropy, ForwardMatchesFloat64Reference) {
  BackendUnderTest cpu(kCpu);
  uint64_t seed = 1;
  for (const Case& c : awkward_cases()) {
    SCOPED_TRACE(name(c));
    std::vector<int32_t> targets = random_targets(c.rows, c.vocab, ++seed);
    Outcome run = run_cpu(*cpu.backend, c.rows, c.vocab, c.dtype, targets, 1.0f, ++seed);
    for (int64_t i = 0; i < c.rows; ++i) {
      // Ignored rows have their lse too: it depends on the logits alone.
      double expected = reference_lse(&run.logits[static_cast<size_t>(i * c.vocab)], c.vocab);
      ASSERT_NEAR(run.lse[static_cast<size_t>(i)], expected, 1e-6 * (1 + std::abs(expected)))
          << "row " << i;
    }
    double loss = reference_loss(run.logits, targets, c.vocab);
    EXPECT_NEAR(run.loss_sum, kInitialLossSum + loss, 2e-6 * (1 + std::abs(loss)));
  }
}

TEST(CpuCrossEntropy, OneColumnVocabularyHasZeroLossAndGradient) {
  BackendUnderTest cpu(kCpu);
  Outcome run = run_cpu(*cpu.backend, 5, 1, DType::kF32, {0, 0, -1, 0, 0}, 0.5f, 3);
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(run.lse[static_cast<size_t>(i)], run.logits[static_cast<size_t>(i)]);
  EXPECT_EQ(run.loss_sum, kInitialLossSum);
  for (double g : run.dlogits)
    EXPECT_EQ(g, 0.0);
}

TEST(CpuCrossEntropy, BackwardMatchesAnalyticGradientAndZeroesIgnoredRows) {
  BackendUnderTest cpu(kCpu);
  uint64_t seed = 100;
  for (const Case& c : awkward_cases()) {
    SCOPED_TRACE(name(c));
    std::vector<int32_t> targets = random_targets(c.rows, c.vocab, ++seed);
    int64_t counted =
        std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; });
    float scale = 1.0f / static_cast<float>(counted);
    Outcome run = run_cpu(*cpu.backend, c.rows, c.vocab, c.dtype, targets, scale, ++seed);
    std::vector<double> expected = reference_grad(run.logits, targets, c.vocab, scale);
    for (size_t k = 0; k < expected.size(); ++k) {
      // bf16 dlogits are rounded once: half an ulp of 2^-8 relative.
      double tolerance = c.dtype == DType::kF32 ? 1e-6 * scale : std::abs(expected[k]) / 256 + 1e-9;
      ASSERT_NEAR(run.dlogits[k], expected[k], tolerance) << "element " << k;
      if (targets[k / static_cast<size_t>(c.vocab)] < 0) {
        ASSERT_EQ(run.dlogits[k], 0.0);
      }
    }
  }
}

// The gradient against the loss itself, not against a formula for it: central
// differences of the float64 reference loss, (L(x + h) - L(x - h)) / 2h, whose
// error is O(h^2) ~ 1e-10 here.
TEST(CpuCrossEntropy, BackwardMatchesFiniteDifferencesOfTheLoss) {
  BackendUnderTest cpu(kCpu);
  const double h = 1e-5;
  uint64_t seed = 200;
  for (const Case& c : awkward_cases()) {
    SCOPED_TRACE(name(c));
    std::vector<int32_t> targets = random_targets(c.rows, c.vocab, ++seed);
    const float scale = 0.625f;
    Outcome run = run_cpu(*cpu.backend, c.rows, c.vocab, c.dtype, targets, scale, ++seed);
    for (int64_t i = 0; i < c.rows; ++i) {
      // Row i's loss depends only on row i: perturb within the row.
      std::vector<double> row(run.logits.begin() + i * c.vocab,
                              run.logits.begin() + (i + 1) * c.vocab);
      std::vector<int32_t> row_target = {targets[static_cast<size_t>(i)]};
      for (int64_t j = 0; j < c.vocab; ++j) {
        double saved = row[static_cast<size_t>(j)];
        row[static_cast<size_t>(j)] = saved + h;
        double up = reference_loss(row, row_target, c.vocab);
        row[static_cast<size_t>(j)] = saved - h;
        double down = reference_loss(row, row_target, c.vocab);
        row[static_cast<size_t>(j)] = saved;
        double expected = scale * (up - down) / (2 * h);
        double got = run.dlogits[static_cast<size_t>(i * c.vocab + j)];
        double tolerance = c.dtype == DType::kF32 ? 2e-6 : std::abs(expected) / 256 + 2e-6;
        ASSERT_NEAR(got, expected, tolerance) << "row " << i << " column " << j;
      }
    }
  }
}

// Large enough for the parallel loops (rows x vocab > 32768) and for more
// rows than loss partials; thread counts must not change a single bit.
TEST(CpuCrossEntropy, SameBitsOnOneThreadAndMany) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(std::string(name_of(dtype)));
    const int64_t rows = 301;
    const int64_t vocab = 1031;
    std::vector<int32_t> targets = random_targets(rows, vocab, 7);
    int saved = omp_get_max_threads();
    BackendUnderTest cpu(kCpu);
    omp_set_num_threads(1);
    Outcome one = run_cpu(*cpu.backend, rows, vocab, dtype, targets, 0.01f, 8);
    omp_set_num_threads(2);
    Outcome two = run_cpu(*cpu.backend, rows, vocab, dtype, targets, 0.01f, 8);
    omp_set_num_threads(std::max(saved, 5));  // more threads than cores: same bits
    Outcome many = run_cpu(*cpu.backend, rows, vocab, dtype, targets, 0.01f, 8);
    omp_set_num_threads(saved);
    for (const Outcome* other : {&two, &many}) {
      EXPECT_EQ(one.loss_bits, other->loss_bits);
      EXPECT_EQ(one.lse_bits, other->lse_bits);
      EXPECT_EQ(one.dlogits_bits, other->dlogits_bits);
    }
    double loss = reference_loss(one.logits, targets, vocab);
    EXPECT_NEAR(one.loss_sum, kInitialLossSum + loss, 1e-6 * loss);
  }
}

// Logits that would overflow exp without the max-subtract.
TEST(CpuCrossEntropy, LargeLogitsAreStable) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  Tensor logits = be.empty({2, 3}, DType::kF32, Category::kLogits, "logits");
  upload(logits, {1000.0f, 999.0f, 998.0f, -1000.0f, -1001.0f, -1002.0f});
  Tensor targets = be.empty({2}, DType::kI32, Category::kActivation, "targets");
  upload_targets(targets, {2, 0});
  Tensor lse = be.empty({2}, DType::kF32, Category::kActivation, "lse");
  Tensor loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss_sum");
  be.fill(loss_sum, 0.0f);
  be.cross_entropy_forward(logits, targets, lse, loss_sum);
  double tail = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  EXPECT_NEAR(lse.data<float>()[0], 1000.0 + tail, 1e-4);
  EXPECT_NEAR(lse.data<float>()[1], -1000.0 + tail, 1e-4);
  EXPECT_NEAR(loss_sum.data<float>()[0], (2 + tail) + tail, 1e-5);
  be.cross_entropy_backward(logits, targets, lse, 1.0f);
  for (double g : download(logits))
    EXPECT_TRUE(std::isfinite(g));
}

// A target outside [-1, V) names its row and value, and nothing is written.
TEST(CpuCrossEntropy, TargetOutOfRangeNamesRowAndValue) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  // -1 and -2 are markers (not counted; counted on another rank).
  for (int32_t bad : {17, 1000, -3}) {
    SCOPED_TRACE(bad);
    Tensor logits = be.empty({4, 17}, DType::kBF16, Category::kLogits, "loss.chunk.3.logits");
    be.fill_uniform(logits, 1, -1.0f, 1.0f);
    Tensor targets = be.empty({4}, DType::kI32, Category::kActivation, "loss.targets");
    upload_targets(targets, {0, 16, bad, -1});
    Tensor lse = be.empty({4}, DType::kF32, Category::kActivation, "loss.lse");
    be.fill(lse, 42.0f);
    Tensor loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss.sum");
    be.fill(loss_sum, 42.0f);
    std::vector<double> before = download(logits);
    std::string expected = "targets 'loss.targets' int32 [4] row 2 = " + std::to_string(bad) +
                           " is outside [-2, 17) for logits 'loss.chunk.3.logits' bf16 [4, 17]";
    try {
      be.cross_entropy_forward(logits, targets, lse, loss_sum);
      ADD_FAILURE() << "forward accepted target " << bad;
    } catch (const InternalError& e) {
      EXPECT_NE(std::string(e.what()).find("cross_entropy_forward: " + expected), std::string::npos)
          << e.what();
    }
    for (double v : download(lse))
      EXPECT_EQ(v, 42.0);
    EXPECT_EQ(download(loss_sum)[0], 42.0);
    try {
      be.cross_entropy_backward(logits, targets, lse, 1.0f);
      ADD_FAILURE() << "backward accepted target " << bad;
    } catch (const InternalError& e) {
      EXPECT_NE(std::string(e.what()).find("cross_entropy_backward: " + expected),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(download(logits), before);
  }
}

TEST(MetaParity, CrossEntropy) {
  Scenario scenario = [](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      // Over 1 MiB of logits: from the large pool, as a real chunk would be.
      Tensor logits = be.empty({301, 1031}, dtype, Category::kLogits, "loss.chunk.0.logits");
      be.fill_uniform(logits, 1, -2.0f, 2.0f);
      Tensor targets = be.empty({301}, DType::kI32, Category::kActivation, "loss.targets");
      be.fill(targets, 5.0f);
      Tensor ignored = targets.rows(10, 20);
      be.fill(ignored, -1.0f);
      Tensor lse = be.empty({301}, DType::kF32, Category::kActivation, "loss.lse");
      Tensor loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss.sum");
      be.fill(loss_sum, 0.0f);
      uint64_t allocs = be.allocator().stats().num_allocs;
      be.cross_entropy_forward(logits, targets, lse, loss_sum);
      // A chunk of rows, through views, as the fused loss calls it.
      Tensor lse_rows = lse.rows(100, 200);
      Tensor logits_rows = logits.rows(100, 200);
      be.cross_entropy_forward(logits_rows, targets.rows(100, 200), lse_rows, loss_sum);
      be.cross_entropy_backward(logits, targets, lse, 1.0f / 291);
      EXPECT_EQ(be.allocator().stats().num_allocs, allocs) << name_of(be.kind());
    }
  };
  expect_same_events(scenario);
}

// Every bad call throws the same message on cpu and meta and writes nothing
// into the allocator beyond its own operands.
TEST(MetaParity, CrossEntropyRejectsTheSameCalls) {
  struct BadCall {
    Scenario call;
    std::string message;
  };
  auto operands = [](Backend& be, int64_t lse_rows, DType logits_dtype, DType target_dtype) {
    struct {
      Tensor logits, targets, lse, loss_sum;
    } o;
    o.logits = be.empty({4, 9}, logits_dtype, Category::kLogits, "loss.chunk.1.logits");
    o.targets = be.empty({4}, target_dtype, Category::kActivation, "loss.targets");
    be.fill(o.targets, 0.0f);
    o.lse = be.empty({lse_rows}, DType::kF32, Category::kActivation, "loss.lse");
    o.loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss.sum");
    return o;
  };
  const std::vector<BadCall> bad_calls = {
      {[&](Backend& be) {
         auto o = operands(be, 5, DType::kF32, DType::kI32);
         be.cross_entropy_forward(o.logits, o.targets, o.lse, o.loss_sum);
       },
       "cross_entropy_forward: lse 'loss.lse' fp32 [5] must have 4 rows, as logits "
       "'loss.chunk.1.logits' fp32 [4, 9] has"},
      {[&](Backend& be) {
         auto o = operands(be, 4, DType::kF32, DType::kI64);
         be.cross_entropy_backward(o.logits, o.targets, o.lse, 1.0f);
       },
       "cross_entropy_backward: targets 'loss.targets' int64 [4] must be int32"},
      {[&](Backend& be) {
         auto o = operands(be, 4, DType::kI32, DType::kI32);
         be.cross_entropy_forward(o.logits, o.targets, o.lse, o.loss_sum);
       },
       "cross_entropy_forward: logits 'loss.chunk.1.logits' int32 [4, 9] must be fp32, bf16 or "
       "fp16"},
      {[&](Backend& be) {
         auto o = operands(be, 4, DType::kF32, DType::kI32);
         Tensor wide = be.empty({2}, DType::kF32, Category::kActivation, "loss.sum");
         be.cross_entropy_forward(o.logits, o.targets, o.lse, wide);
       },
       "cross_entropy_forward: loss_sum 'loss.sum' fp32 [2] must be fp32 [1]"},
      {[&](Backend& be) {
         auto o = operands(be, 4, DType::kF32, DType::kI32);
         Tensor inside = o.logits.view({36}).rows(0, 4);
         be.cross_entropy_forward(o.logits, o.targets, inside, o.loss_sum);
       },
       "cross_entropy_forward: lse 'loss.chunk.1.logits' fp32 [4] overlaps logits "
       "'loss.chunk.1.logits' fp32 [4, 9]"},
      {[&](Backend& be) {
         auto o = operands(be, 4, DType::kBF16, DType::kI32);
         be.cross_entropy_backward(o.logits, o.targets, o.lse,
                                   std::numeric_limits<float>::infinity());
       },
       "cross_entropy_backward: scale inf is not finite (for 'loss.chunk.1.logits' bf16 [4, 9])"},
  };
  for (size_t i = 0; i < bad_calls.size(); ++i) {
    std::string messages[2];
    std::vector<EventRecord> events[2];
    for (int kind = 0; kind < 2; ++kind) {
      BackendUnderTest under_test(kind == 0 ? kCpu : kMeta);
      EventRecorder recorder(under_test.allocator);
      try {
        bad_calls[i].call(*under_test.backend);
        ADD_FAILURE() << "call " << i << " was accepted";
      } catch (const InternalError& e) {
        messages[kind] = e.what();
      }
      EXPECT_EQ(under_test.allocator.num_live_blocks(), 0u) << "call " << i;
      events[kind] = recorder.events();
    }
    EXPECT_EQ(messages[0], bad_calls[i].message) << "call " << i;
    EXPECT_EQ(messages[0], messages[1]) << "call " << i;
    EXPECT_EQ(events[0], events[1]) << "call " << i;
  }
}

}  // namespace
}  // namespace headroom::backend_test
