// cpu gemm against a float64 reference: every transpose combination, awkward
// sizes, alpha/beta (beta = 0 over a NaN-filled C), fp32 and bf16.
//
// Tolerances. The reference is computed in float64 on the operands exactly
// as the kernel sees them (bf16 inputs are already rounded when uploaded, so
// the reference multiplies the same bf16 values), so the only errors left are
// the kernel's own:
//  - fp32 accumulation over k terms: at most ~k·eps·S, typically ~sqrt(k)·eps·S,
//    where S = |alpha|·Σ|a·b| + |beta·c| is the sum of the terms' magnitudes
//    (not |C|, which cancellation can make arbitrarily small) and eps = 6e-8.
//    We allow 1e-5·sqrt(k)·S: ~100x the typical error, and above the worst
//    case for every k tested here (k·eps < 1e-5·sqrt(k) for k < 2700).
//  - a bf16 C is rounded once at the end: relative error <= 2^-9 ~ 2e-3 of |C|;
//    we allow 1e-2·|C| on top of the accumulation term.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "backend/cpu/gemm_plan.h"
#include "backend_test_util.h"

namespace headroom::backend_test {
namespace {

struct Case {
  int64_t m, n, k;
};
// 1, odd, prime and just-past-a-power-of-two sizes, each in every position;
// n wider than a gemm:jit column block (kGemmJitColumns), with a narrower
// last block and as an exact multiple.
const std::vector<Case> kCases = {{1, 1, 1},      {1, 17, 3},     {3, 1, 65},    {17, 65, 1},
                                  {65, 3, 130},   {130, 130, 17}, {17, 130, 65}, {64, 64, 64},
                                  {130, 65, 130}, {9, 300, 33},   {20, 512, 7}};
const std::vector<std::pair<float, float>> kAlphaBeta = {
    {1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}};

struct Dtypes {
  DType ab, c;
};
const std::vector<Dtypes> kDtypes = {
    {DType::kF32, DType::kF32}, {DType::kBF16, DType::kF32}, {DType::kBF16, DType::kBF16}};

// Runs one gemm on cpu and checks every element against the float64 reference.
void check_gemm_case(Backend& backend, Case cs, bool ta, bool tb, Dtypes dt, float alpha,
                     float beta, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k
                                    << " ta=" << ta << " tb=" << tb << " " << name_of(dt.ab) << "->"
                                    << name_of(dt.c) << " alpha=" << alpha << " beta=" << beta);
  Shape a_shape = ta ? Shape{cs.k, cs.m} : Shape{cs.m, cs.k};
  Shape b_shape = tb ? Shape{cs.n, cs.k} : Shape{cs.k, cs.n};
  Tensor a = backend.empty(a_shape, dt.ab, Category::kActivation, "a");
  Tensor b = backend.empty(b_shape, dt.ab, Category::kParam, "b");
  Tensor c = backend.empty({cs.m, cs.n}, dt.c, Category::kActivation, "c");
  upload(a, random_values(a.numel(), seed));
  upload(b, random_values(b.numel(), seed + 1));
  if (beta == 0.0f)
    backend.fill(c, std::numeric_limits<float>::quiet_NaN());  // must not leak
  else
    upload(c, random_values(c.numel(), seed + 2));
  std::vector<double> va = download(a), vb = download(b), vc = download(c);

  backend.gemm(a, ta, b, tb, c, alpha, beta);
  std::vector<double> out = download(c);

  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < cs.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < cs.k; ++p) {
        double x = va[static_cast<size_t>(ta ? p * cs.m + i : i * cs.k + p)];
        double y = vb[static_cast<size_t>(tb ? j * cs.k + p : p * cs.n + j)];
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      double c0 = beta == 0.0f ? 0.0 : vc[static_cast<size_t>(i * cs.n + j)];
      double expected = alpha * sum + beta * c0;
      double scale = std::fabs(alpha) * magnitude + std::fabs(beta * c0);
      double tol = 1e-5 * std::sqrt(static_cast<double>(cs.k)) * scale;
      if (dt.c == DType::kBF16) tol += 1e-2 * std::fabs(expected);
      double got = out[static_cast<size_t>(i * cs.n + j)];
      ASSERT_TRUE(std::isfinite(got)) << "C[" << i << "," << j << "] = " << got;
      ASSERT_NEAR(got, expected, tol) << "C[" << i << "," << j << "]";
    }
  }
}

void check_all_cases(DType ab, DType c) {
  BackendUnderTest cpu(BackendKind::kCpu);
  uint64_t seed = 100;
  for (const Case& cs : kCases)
    for (int t = 0; t < 4; ++t)
      for (auto [alpha, beta] : kAlphaBeta)
        check_gemm_case(*cpu.backend, cs, t & 1, t & 2, {ab, c}, alpha, beta, seed += 3);
}

TEST(CpuGemm, Fp32) {
  check_all_cases(DType::kF32, DType::kF32);
}
TEST(CpuGemm, Bf16InputsFp32Output) {
  check_all_cases(DType::kBF16, DType::kF32);
}
TEST(CpuGemm, Bf16InputsBf16Output) {
  check_all_cases(DType::kBF16, DType::kBF16);
}

TEST(CpuGemm, RepeatedCallsReuseThePlanAndAgreeBitForBit) {
  BackendUnderTest cpu(BackendKind::kCpu);
  for (Dtypes dt : kDtypes) {
    Tensor a = cpu.backend->empty({33, 47}, dt.ab, Category::kActivation, "a");
    Tensor b = cpu.backend->empty({47, 29}, dt.ab, Category::kParam, "b");
    Tensor c1 = cpu.backend->empty({33, 29}, dt.c, Category::kActivation, "c1");
    Tensor c2 = cpu.backend->empty({33, 29}, dt.c, Category::kActivation, "c2");
    upload(a, random_values(a.numel(), 1));
    upload(b, random_values(b.numel(), 2));
    cpu.backend->gemm(a, false, b, false, c1, 1.0f, 0.0f);
    cpu.backend->gemm(a, false, b, false, c2, 1.0f, 0.0f);
    EXPECT_EQ(std::memcmp(c1.raw(), c2.raw(), c1.nbytes()), 0) << name_of(dt.ab);
  }
}

// Where oneDNN runs gemm:jit, a gemm wider than kGemmJitColumns is computed
// in column blocks (GemmPlan::block_columns); like oneDNN's own kernels they
// must give the same bits for any thread count. Run under
// DNNL_MAX_CPU_ISA=AVX2 too (tests/backend/CMakeLists.txt), where they are
// blocked on any CPU.
TEST(CpuGemm, ColumnBlocksGiveTheSameBitsForAnyThreadCount) {
  BackendUnderTest cpu(BackendKind::kCpu);
  const int saved = omp_get_max_threads();
  for (Dtypes dt : kDtypes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      SCOPED_TRACE(::testing::Message()
                   << name_of(dt.ab) << "->" << name_of(dt.c) << " ta=" << ta << " tb=" << tb);
      const int64_t m = 70, n = 300, k = 40;
      Tensor a =
          cpu.backend->empty(ta ? Shape{k, m} : Shape{m, k}, dt.ab, Category::kActivation, "a");
      Tensor b = cpu.backend->empty(tb ? Shape{n, k} : Shape{k, n}, dt.ab, Category::kParam, "b");
      upload(a, random_values(a.numel(), 11));
      upload(b, random_values(b.numel(), 12));
      std::vector<std::vector<uint8_t>> results;
      for (int threads : {1, std::max(saved, 3)}) {
        omp_set_num_threads(threads);
        Tensor c = cpu.backend->empty({m, n}, dt.c, Category::kActivation, "c");
        upload(c, random_values(c.numel(), 13));
        cpu.backend->gemm(a, ta, b, tb, c, 0.5f, 1.0f);  // beta = 1: the accumulating form
        const auto* bytes = static_cast<const uint8_t*>(c.raw());
        results.emplace_back(bytes, bytes + c.nbytes());
      }
      omp_set_num_threads(saved);
      EXPECT_TRUE(results[0] == results[1]);
    }
  }
}

TEST(CpuGemm, AccumulatesIntoC) {
  // beta = 1 twice: C = A@B + (A@B + C0), the gradient-accumulation pattern.
  BackendUnderTest cpu(BackendKind::kCpu);
  Tensor a = cpu.backend->empty({5, 7}, DType::kF32, Category::kActivation, "a");
  Tensor b = cpu.backend->empty({7, 3}, DType::kF32, Category::kParam, "b");
  Tensor c = cpu.backend->empty({5, 3}, DType::kF32, Category::kGrad, "c");
  upload(a, std::vector<float>(35, 0.5f));
  upload(b, std::vector<float>(21, 0.25f));
  cpu.backend->fill(c, 1.0f);
  cpu.backend->gemm(a, false, b, false, c, 1.0f, 1.0f);
  cpu.backend->gemm(a, false, b, false, c, 1.0f, 1.0f);
  for (double v : download(c))
    EXPECT_EQ(v, 1.0 + 2 * 7 * 0.125);
}

TEST(CpuGemm, EmptyInnerDimensionScalesC) {
  BackendUnderTest cpu(BackendKind::kCpu);
  for (Dtypes dt : kDtypes) {
    Tensor a = cpu.backend->empty({4, 0}, dt.ab, Category::kActivation, "a");
    Tensor b = cpu.backend->empty({0, 6}, dt.ab, Category::kParam, "b");
    Tensor c = cpu.backend->empty({4, 6}, dt.c, Category::kActivation, "c");
    cpu.backend->fill(c, 3.0f);
    cpu.backend->gemm(a, false, b, false, c, 2.0f, 0.5f);
    for (double v : download(c))
      ASSERT_EQ(v, 1.5);
    cpu.backend->fill(c, std::numeric_limits<float>::quiet_NaN());
    cpu.backend->gemm(a, false, b, false, c, 2.0f, 0.0f);
    for (double v : download(c))
      ASSERT_EQ(v, 0.0);
    // No rows: nothing to do, and nothing to fail.
    Tensor a0 = cpu.backend->empty({0, 3}, dt.ab, Category::kActivation, "a0");
    Tensor b0 = cpu.backend->empty({3, 6}, dt.ab, Category::kParam, "b0");
    Tensor c0 = cpu.backend->empty({0, 6}, dt.c, Category::kActivation, "c0");
    cpu.backend->gemm(a0, false, b0, false, c0, 1.0f, 0.0f);
  }
}

TEST(CpuGemm, ShapeMismatchNamesTagsAndShapes) {
  BackendUnderTest cpu(BackendKind::kCpu);
  Tensor x = cpu.backend->empty({4, 8}, DType::kF32, Category::kActivation, "block.3.attn_in");
  Tensor w = cpu.backend->empty({16, 9}, DType::kF32, Category::kParam, "block.3.wq");
  Tensor y = cpu.backend->empty({4, 16}, DType::kF32, Category::kActivation, "block.3.q");
  try {
    cpu.backend->gemm(x, false, w, true, y, 1.0f, 0.0f);
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("gemm"), std::string::npos) << what;
    EXPECT_NE(what.find("'block.3.attn_in' fp32 [4, 8]"), std::string::npos) << what;
    EXPECT_NE(what.find("'block.3.wq' fp32 [16, 9] (transposed)"), std::string::npos) << what;
  }
  Tensor y_wrong = cpu.backend->empty({4, 15}, DType::kF32, Category::kActivation, "block.3.q");
  Tensor w_ok = cpu.backend->empty({16, 8}, DType::kF32, Category::kParam, "block.3.wq");
  EXPECT_THROW(cpu.backend->gemm(x, false, w_ok, true, y_wrong, 1.0f, 0.0f), InternalError);
  Tensor w_bf16 = cpu.backend->empty({16, 8}, DType::kBF16, Category::kParam, "block.3.wq");
  EXPECT_THROW(cpu.backend->gemm(x, false, w_bf16, true, y, 1.0f, 0.0f), InternalError);
  // C aliasing an operand would be read while written.
  Tensor square = cpu.backend->empty({8, 8}, DType::kF32, Category::kActivation, "sq");
  EXPECT_THROW(cpu.backend->gemm(square, false, square, false, square, 1.0f, 0.0f), InternalError);
}

TEST(GemmPlans, OneDescriptorPerKey) {
  GemmPlans plans;
  GemmKey key = make_gemm_key({17, 65, 130}, true, false, DType::kF32, DType::kF32, 1.0f, 0.0f);
  GemmPlan& first = plans.get(key);
  GemmPlan& again = plans.get(key);
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(plans.size(), 1u);
  EXPECT_EQ(first.route, GemmRoute::kNative);
  plans.get(make_gemm_key({17, 65, 130}, true, false, DType::kF32, DType::kF32, 1.0f, 0.5f));
  EXPECT_EQ(plans.size(), 2u);  // beta is baked into the primitive
  GemmKey bf16 = make_gemm_key({17, 65, 130}, false, false, DType::kBF16, DType::kBF16, 1, 0);
  GemmRoute route = plans.get(bf16).route;
  // Native on AVX-512 / AMX machines, widened to fp32 elsewhere (AVX2).
  EXPECT_TRUE(route == GemmRoute::kNative || route == GemmRoute::kWidened);
}

// Column blocks only where oneDNN chose gemm:jit, n is wider than a block
// and the gemm is small enough (op(A) and m * n * k within their bounds):
// one full-block descriptor, and a tail one when n is not a multiple. Under
// DNNL_MAX_CPU_ISA=AVX2 every fp32 gemm is gemm:jit, which the test then
// requires, so it cannot pass there without blocking.
TEST(GemmPlans, BlocksColumnsOnlyOnGemmJit) {
  GemmPlans plans;
  const char* isa = std::getenv("DNNL_MAX_CPU_ISA");
  const bool avx2_only = isa != nullptr && std::string_view(isa) == "AVX2";
  struct BlockCase {
    int64_t m, n, k;
    bool blocked_on_gemm_jit;
  };
  const std::vector<BlockCase> cases = {
      {64, 256, 32, false},       // one block wide
      {64, 300, 32, true},        // a block and a tail of 44
      {64, 512, 32, true},        // two blocks
      {2048, 2048, 256, true},    // op(A) 2^19 elements, 2^30 multiply-adds
      {1024, 4096, 1024, false},  // op(A) 2^20 elements, but 2^32 multiply-adds
      {2048, 512, 1920, false}};  // op(A) of 2048 x 1920 (15 MiB)
  for (BlockCase cs : cases) {
    SCOPED_TRACE(::testing::Message() << cs.m << " x " << cs.n << " x " << cs.k);
    GemmPlan& plan = plans.get(
        make_gemm_key({cs.m, cs.n, cs.k}, false, true, DType::kF32, DType::kF32, 1.0f, 0.0f));
    const bool jit = std::string_view(plan.descriptor.impl_info_str()).starts_with("gemm:jit");
    if (avx2_only) {
      EXPECT_TRUE(jit) << plan.descriptor.impl_info_str();
    }
    const int64_t n = cs.n;
    const bool blocked = jit && cs.blocked_on_gemm_jit;
    EXPECT_EQ(plan.block_columns, blocked ? kGemmJitColumns : 0);
    EXPECT_EQ(static_cast<bool>(plan.tail_descriptor), blocked && n % kGemmJitColumns != 0);
    plans.primitive(plan);
    EXPECT_TRUE(plan.primitive);
    EXPECT_EQ(static_cast<bool>(plan.tail_primitive), static_cast<bool>(plan.tail_descriptor));
  }
}

// Packed batches bring new shapes nearly every step: the executable
// primitives kept are bounded, the least recently executed go first, and an
// evicted plan is rebuilt on its next use.
TEST(GemmPlans, KeepsTheMostRecentlyExecutedPrimitivesOnly) {
  GemmPlans plans;
  const size_t shapes = GemmPlans::kExecutablePrimitives + 6;
  auto key_of = [](size_t i) {
    return make_gemm_key({static_cast<int64_t>(i + 1), 8, 16}, false, true, DType::kF32,
                         DType::kF32, 1.0f, 0.0f);
  };
  for (size_t i = 0; i < shapes; ++i) {
    GemmPlan& plan = plans.get(key_of(i));
    EXPECT_TRUE(plans.primitive(plan));
    EXPECT_LE(plans.executable(), GemmPlans::kExecutablePrimitives);
  }
  EXPECT_EQ(plans.size(), shapes);  // descriptors are all kept
  EXPECT_EQ(plans.executable(), GemmPlans::kExecutablePrimitives);
  EXPECT_FALSE(plans.get(key_of(0)).primitive);          // the oldest went
  EXPECT_TRUE(plans.get(key_of(shapes - 1)).primitive);  // the newest stayed
  // Using a kept one makes it the most recent: the next eviction spares it.
  GemmPlan& kept = plans.get(key_of(shapes - GemmPlans::kExecutablePrimitives));
  plans.primitive(kept);
  plans.primitive(plans.get(key_of(0)));
  EXPECT_TRUE(kept.primitive);
  EXPECT_TRUE(plans.get(key_of(0)).primitive);
  EXPECT_EQ(plans.executable(), GemmPlans::kExecutablePrimitives);
}

// A step's keys that recur every step (LoRA's 25 on the quickstart) are all
// kept from the third step on, however many past kExecutablePrimitives;
// keys new in every step (packed bins of new token counts) are not.
TEST(GemmPlans, KeepsTheKeysThatRecurEveryStep) {
  auto key_of = [](size_t i) {
    return make_gemm_key({static_cast<int64_t>(i + 1), 8, 16}, false, true, DType::kF32,
                         DType::kF32, 1.0f, 0.0f);
  };
  const size_t cycle = GemmPlans::kExecutablePrimitives + 9;
  GemmPlans recurring;
  std::vector<uint64_t> made;
  for (int64_t step = 0; step < 5; ++step) {
    recurring.at_step(step);
    const uint64_t before = recurring.primitives_made();
    for (size_t i = 0; i < cycle; ++i)
      recurring.primitive(recurring.get(key_of(i)));
    made.push_back(recurring.primitives_made() - before);
  }
  // Steps 0 and 1 at 16: the least recently executed goes first, so a cycle
  // of 25 misses every key. Step 1 counted 25 recurring keys, so step 2
  // makes only the 9 its start finds evicted, and then nothing is made.
  EXPECT_EQ(made, (std::vector<uint64_t>{cycle, cycle, cycle - 16, 0, 0}));
  EXPECT_EQ(recurring.capacity(), cycle);
  EXPECT_EQ(recurring.executable(), cycle);
  recurring.at_step(5);  // the same step again changes nothing
  recurring.at_step(5);
  EXPECT_EQ(recurring.capacity(), cycle);

  // New keys every step: nothing recurs, and 16 are kept.
  GemmPlans fresh;
  for (int64_t step = 0; step < 4; ++step) {
    fresh.at_step(step);
    for (size_t i = 0; i < cycle; ++i)
      fresh.primitive(fresh.get(key_of(static_cast<size_t>(step) * cycle + i)));
    EXPECT_EQ(fresh.capacity(), GemmPlans::kExecutablePrimitives) << "step " << step;
    EXPECT_EQ(fresh.executable(), GemmPlans::kExecutablePrimitives) << "step " << step;
  }

  // Keys that stop coming back stop counting kRecurrenceSteps steps after
  // their last execution (step 4): the capacity shrinks back, and the next
  // primitive made evicts down to it.
  recurring.at_step(4 + GemmPlans::kRecurrenceSteps);  // steps 5.. executed nothing
  EXPECT_EQ(recurring.capacity(), cycle);
  recurring.at_step(4 + GemmPlans::kRecurrenceSteps + 1);
  EXPECT_EQ(recurring.capacity(), GemmPlans::kExecutablePrimitives);
  EXPECT_EQ(recurring.executable(), cycle);  // nothing evicted until one is made
  recurring.primitive(recurring.get(key_of(cycle + 1)));
  EXPECT_EQ(recurring.executable(), GemmPlans::kExecutablePrimitives);

  // Steps never announced (a kernel test, a bench): 16, as before.
  GemmPlans unstepped;
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < cycle; ++i)
      unstepped.primitive(unstepped.get(key_of(i)));
  EXPECT_EQ(unstepped.capacity(), GemmPlans::kExecutablePrimitives);
  EXPECT_EQ(unstepped.primitives_made(), 3 * cycle);
}

// Length buckets: each step runs the gemms of one of a few shapes, drawn at
// random, so a shape's keys come back within a few steps but rarely in the
// very next one. Kept by the previous step's keys alone, a cache of 16 re-made
// a shape's primitives at nearly every change of shape.
TEST(GemmPlans, KeepsTheShapesThatComeBackWithinAFewSteps) {
  constexpr size_t kShapes = 3, kKeysPerShape = 16;  // 48 keys, within kPlans
  auto key_of = [](size_t shape, size_t i) {
    return make_gemm_key({static_cast<int64_t>(64 * (shape + 1)), static_cast<int64_t>(i + 1), 8},
                         false, true, DType::kF32, DType::kF32, 1.0f, 0.0f);
  };
  // Gaps of up to 7 steps between a shape's steps, never the same twice in
  // a row after the first three.
  const std::vector<size_t> draws = {0, 0, 1, 2, 1, 0, 2, 1, 0, 1, 2, 0, 1, 0, 2, 1,
                                     2, 0, 1, 2, 0, 1, 0, 2, 1, 2, 1, 0, 1, 2, 0, 2};
  GemmPlans plans;
  std::vector<uint64_t> made;
  for (size_t step = 0; step < draws.size(); ++step) {
    plans.at_step(static_cast<int64_t>(step));
    const uint64_t before = plans.primitives_made();
    for (size_t i = 0; i < kKeysPerShape; ++i)
      plans.primitive(plans.get(key_of(draws[step], i)));
    made.push_back(plans.primitives_made() - before);
  }
  // A shape counts once it has come back: 0 from step 2, 1 from step 5, 2
  // from step 7. Until then each new shape evicts the one before (steps 4
  // to 7 re-make shapes met before); from step 8 on all 48 keys count, and
  // nothing is made again.
  const std::vector<uint64_t> warm_up = {16, 0, 16, 16, 16, 16, 16, 16};
  EXPECT_EQ(std::vector<uint64_t>(made.begin(), made.begin() + 8), warm_up);
  for (size_t step = 8; step < draws.size(); ++step)
    EXPECT_EQ(made[step], 0u) << "step " << step;
  EXPECT_EQ(plans.capacity(), kShapes * kKeysPerShape);
  EXPECT_EQ(plans.executable(), kShapes * kKeysPerShape);
}

TEST(GemmPlans, KeepsTheMostRecentlyUsedDescriptorsOnly) {
  GemmPlans plans;
  auto key_of = [](size_t i) {
    return make_gemm_key({static_cast<int64_t>(i + 1), 4, 8}, false, false, DType::kF32,
                         DType::kF32, 1.0f, 0.0f);
  };
  plans.primitive(plans.get(key_of(0)));  // the oldest has a primitive, to go with it
  for (size_t i = 1; i < GemmPlans::kPlans + 10; ++i) {
    plans.get(key_of(i));
    plans.get(key_of(1));  // used again and again: never the oldest
  }
  EXPECT_EQ(plans.size(), GemmPlans::kPlans);
  EXPECT_EQ(plans.executable(), 0u);  // went with its plan
  const uint64_t scratchpad = plans.get(key_of(1)).scratchpad_bytes;
  EXPECT_EQ(plans.get(key_of(0)).route, GemmRoute::kNative);  // rebuilt on demand
  EXPECT_EQ(plans.size(), GemmPlans::kPlans);
  EXPECT_EQ(plans.get(key_of(1)).scratchpad_bytes, scratchpad);
}

TEST(CpuGemm, AnEvictedPlanGivesTheSameBitsWhenRebuilt) {
  BackendUnderTest cpu(BackendKind::kCpu);
  Tensor b = cpu.backend->empty({24, 40}, DType::kF32, Category::kParam, "b");
  upload(b, random_values(b.numel(), 5));
  Tensor a = cpu.backend->empty({9, 24}, DType::kF32, Category::kActivation, "a");
  upload(a, random_values(a.numel(), 6));
  Tensor first = cpu.backend->empty({9, 40}, DType::kF32, Category::kActivation, "first");
  cpu.backend->gemm(a, false, b, false, first, 1.0f, 0.0f);
  for (int64_t m = 10; m < 10 + static_cast<int64_t>(GemmPlans::kExecutablePrimitives) + 4; ++m) {
    Tensor am = cpu.backend->empty({m, 24}, DType::kF32, Category::kActivation, "am");
    Tensor cm = cpu.backend->empty({m, 40}, DType::kF32, Category::kActivation, "cm");
    upload(am, random_values(am.numel(), static_cast<uint64_t>(m)));
    cpu.backend->gemm(am, false, b, false, cm, 1.0f, 0.0f);
  }
  Tensor again = cpu.backend->empty({9, 40}, DType::kF32, Category::kActivation, "again");
  cpu.backend->gemm(a, false, b, false, again, 1.0f, 0.0f);
  EXPECT_EQ(std::memcmp(first.raw(), again.raw(), first.nbytes()), 0);
}

// Backend::share_gemm_operand. x (bf16, 40 x 24) is read by five gemms as a
// block's forward and backward read a shared operand: as A twice, as B, as
// A^T, and as both A^T and B of one gemm. Outputs in this order.
std::vector<Tensor> gemms_over(Backend& backend, const Tensor& x, const Tensor& w, const Tensor& d,
                               bool share) {
  std::vector<Tensor> out = {backend.empty({40, 17}, DType::kBF16, Category::kActivation, "y1"),
                             backend.empty({40, 17}, DType::kBF16, Category::kActivation, "y2"),
                             backend.empty({17, 24}, DType::kBF16, Category::kActivation, "g"),
                             backend.empty({24, 17}, DType::kBF16, Category::kActivation, "h"),
                             backend.empty({24, 24}, DType::kBF16, Category::kActivation, "s")};
  std::optional<SharedGemmOperand> shared;
  if (share) shared.emplace(backend.share_gemm_operand(x));
  backend.gemm(x, false, w, true, out[0], 1.0f, 0.0f);  // (40, 17) = x w^T
  backend.gemm(x, false, w, true, out[1], 0.5f, 0.0f);
  backend.gemm(d, true, x, false, out[2], 1.0f, 0.0f);  // (17, 24) = d^T x
  backend.gemm(x, true, d, false, out[3], 1.0f, 0.0f);  // (24, 17) = x^T d
  backend.gemm(x, true, x, false, out[4], 1.0f, 0.0f);  // (24, 24) = x^T x
  return out;
}

struct SharedOperandInputs {
  explicit SharedOperandInputs(Backend& backend)
      : x(backend.empty({40, 24}, DType::kBF16, Category::kActivation, "x")),
        w(backend.empty({17, 24}, DType::kBF16, Category::kParam, "w")),
        d(backend.empty({40, 17}, DType::kBF16, Category::kActivation, "d")) {
    if (backend.kind() == BackendKind::kMeta) return;
    upload(x, random_values(x.numel(), 11));
    upload(w, random_values(w.numel(), 12));
    upload(d, random_values(d.numel(), 13));
  }
  Tensor x, w, d;
};

TEST(CpuGemm, ASharedOperandGivesTheBitsOfUnsharedGemms) {
  BackendUnderTest cpu(BackendKind::kCpu);
  SharedOperandInputs in(*cpu.backend);
  const std::vector<Tensor> alone = gemms_over(*cpu.backend, in.x, in.w, in.d, false);
  const std::vector<Tensor> shared = gemms_over(*cpu.backend, in.x, in.w, in.d, true);
  for (size_t i = 0; i < alone.size(); ++i)
    EXPECT_EQ(std::memcmp(alone[i].raw(), shared[i].raw(), alone[i].nbytes()), 0) << alone[i].tag();
}

// Where bf16 is widened (no AVX-512, or DNNL_MAX_CPU_ISA=AVX2), x's copy is
// made once, by the first gemm, tagged gemm.shared_fp32 and freed with the
// guard; the other operands are widened per call as before, and A = B is
// one copy. Natively nothing is widened and sharing allocates nothing. meta
// makes the same allocations as cpu either way.
TEST(CpuGemm, ASharedOperandIsWidenedOnceAndFreedWithItsGuard) {
  GemmPlans plans;
  const bool widened =
      plans.get(make_gemm_key({40, 17, 24}, false, true, DType::kBF16, DType::kBF16, 1.0f, 0.0f))
          .route == GemmRoute::kWidened;
  std::vector<std::vector<EventRecord>> events;
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kMeta}) {
    BackendUnderTest under_test(kind);
    SharedOperandInputs in(*under_test.backend);
    EventRecorder recorder(under_test.allocator);
    gemms_over(*under_test.backend, in.x, in.w, in.d, true);
    EXPECT_EQ(under_test.allocator.live(Category::kWorkspace), 0u);
    events.push_back(recorder.events());
  }
  ASSERT_EQ(events[0].size(), events[1].size());
  for (size_t i = 0; i < events[0].size(); ++i)
    EXPECT_EQ(events[0][i], events[1][i])
        << i << ": " << to_string(events[0][i]) << " vs " << to_string(events[1][i]);

  std::map<std::string, int> allocs;
  int last_workspace_free = -1, shared_free = -1;
  for (size_t i = 0; i < events[0].size(); ++i) {
    const auto& [action, bytes, category, tag] = events[0][i];
    if (action == MemoryAction::kAlloc) ++allocs[tag];
    if (action == MemoryAction::kAlloc && tag == "gemm.shared_fp32") {
      EXPECT_EQ(bytes, Allocator::round_size(40 * 24 * 4));
    }
    if (action == MemoryAction::kFree && category == Category::kWorkspace)
      last_workspace_free = static_cast<int>(i);
    if (action == MemoryAction::kFree && tag == "gemm.shared_fp32")
      shared_free = static_cast<int>(i);
  }
  if (!widened) {
    EXPECT_EQ(allocs.count("gemm.shared_fp32") + allocs.count("gemm.a_fp32") +
                  allocs.count("gemm.b_fp32"),
              0u);
    return;
  }
  EXPECT_EQ(allocs["gemm.shared_fp32"], 1);
  EXPECT_EQ(allocs["gemm.a_fp32"], 1);  // d, as A^T
  EXPECT_EQ(allocs["gemm.b_fp32"], 3);  // w twice, d once; x^T x reads x's copy twice
  EXPECT_EQ(shared_free, last_workspace_free);
}

// A shared operand is read-only while shared: its widened copy would go stale
// on an AVX2 host. Checked on every backend with the host-cpu rule and every
// route, so a caller that breaks it fails here too.
TEST(CpuGemm, WritingASharedOperandIsAnInternalError) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kMeta}) {
    BackendUnderTest under_test(kind);
    Backend& backend = *under_test.backend;
    SharedOperandInputs in(backend);
    Tensor y = backend.empty({40, 17}, DType::kBF16, Category::kActivation, "y");
    {
      const SharedGemmOperand shared = backend.share_gemm_operand(y);
      EXPECT_THROW(backend.gemm(in.x, false, in.w, true, y, 1.0f, 0.0f), InternalError);
      // Part of the shared bytes, seen as another tensor, is the same memory.
      Tensor x_rows = in.x.rows(0, 8);
      Tensor y_rows = y.rows(32, 40);
      EXPECT_THROW(backend.gemm(x_rows, false, in.w, true, y_rows, 1.0f, 0.0f), InternalError);
    }
    backend.gemm(in.x, false, in.w, true, y, 1.0f, 0.0f);  // unshared: written as before
    // The bytes just past a shared operand are not part of it.
    Tensor both = backend.empty({80, 17}, DType::kBF16, Category::kActivation, "both");
    Tensor first = both.rows(0, 40), second = both.rows(40, 80);
    const SharedGemmOperand shared = backend.share_gemm_operand(first);
    backend.gemm(in.x, false, in.w, true, second, 1.0f, 0.0f);
  }
}

TEST(SharedGemmOperands, SharesNestAndAnUnknownUnshareIsAnInternalError) {
  BackendUnderTest meta(BackendKind::kMeta);
  Tensor x = meta.backend->empty({4, 4}, DType::kBF16, Category::kActivation, "x");
  Tensor y = meta.backend->empty({4, 4}, DType::kBF16, Category::kActivation, "y");
  SharedGemmOperands shared;
  shared.share(x);
  shared.share(y);
  shared.share(x);
  shared.unshare(x);
  EXPECT_EQ(shared.size(), 2u);
  shared.unshare(x);
  EXPECT_THROW(shared.unshare(x), InternalError);
  // The same bytes seen as another shape are another operand.
  EXPECT_THROW(shared.unshare(y.view({16})), InternalError);
  shared.unshare(y);
  EXPECT_EQ(shared.size(), 0u);
}

}  // namespace
}  // namespace headroom::backend_test
