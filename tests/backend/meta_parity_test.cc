// Plan = run, op by op: the same calls on cpu (host memory) and on meta
// (virtual addresses) must produce the same allocator events — action, bytes,
// category, tag, in the same order, segments included — and reject the same
// bad calls with the same message, allocating nothing.
#include <functional>
#include <limits>

#include "backend/cpu/gemm_plan.h"
#include "backend_test_util.h"

namespace headroom::backend_test {
namespace {

using Scenario = std::function<void(Backend&)>;

std::vector<EventRecord> record(BackendKind kind, const Scenario& scenario) {
  BackendUnderTest under_test(kind);
  EventRecorder recorder(under_test.allocator);
  scenario(*under_test.backend);
  // Not empty_cache(): it releases segments in address order, which differs
  // between host and virtual sources (reported to the allocator's owner).
  return recorder.events();
}

void expect_same_events(const Scenario& scenario) {
  std::vector<EventRecord> cpu = record(BackendKind::kCpu, scenario);
  std::vector<EventRecord> meta = record(BackendKind::kMeta, scenario);
  ASSERT_FALSE(cpu.empty());
  for (size_t i = 0; i < std::min(cpu.size(), meta.size()); ++i)
    ASSERT_EQ(cpu[i], meta[i]) << "event " << i << ": cpu " << to_string(cpu[i]) << ", meta "
                               << to_string(meta[i]);
  ASSERT_EQ(cpu.size(), meta.size());
}

// An initialized input on either backend (fill_uniform is a no-op on meta).
Tensor input(Backend& backend, const Shape& shape, DType dtype, std::string_view tag,
             uint64_t seed) {
  Tensor t = backend.empty(shape, dtype, Category::kActivation, tag);
  backend.fill_uniform(t, seed, -1.0f, 1.0f);
  return t;
}

TEST(MetaParity, Fill) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
      Tensor x = be.empty({17, 65}, dtype, Category::kActivation, "x");
      be.fill(x, 1.0f);
    }
  });
}

TEST(MetaParity, FillUniform) {
  expect_same_events([](Backend& be) {
    Tensor w = be.empty({4096, 130}, DType::kBF16, Category::kParam, "w");
    be.fill_uniform(w, 1, -0.02f, 0.02f);
    Tensor v = be.empty({3}, DType::kF32, Category::kParam, "v");
    be.fill_uniform(v, 2, 0.0f, 1.0f);
  });
}

TEST(MetaParity, Copy) {
  expect_same_events([](Backend& be) {
    Tensor src = input(be, {300, 1031}, DType::kF32, "src", 1);
    Tensor dst = be.empty({300, 1031}, DType::kF32, Category::kCheckpoint, "dst");
    be.copy(src, dst);
    be.copy(dst, dst);
    Tensor part = dst.rows(10, 20);
    be.copy(src.rows(0, 10), part);
  });
}

TEST(MetaParity, Cast) {
  expect_same_events([](Backend& be) {
    Tensor x = input(be, {65, 4099}, DType::kF32, "x", 1);
    std::vector<Tensor> kept;
    kept.push_back(be.cast(x, DType::kBF16, Category::kActivation, "x.bf16"));
    kept.push_back(be.cast(kept.back(), DType::kF32, Category::kLogits, "x.fp32"));
    kept.push_back(be.cast(x, DType::kF32, Category::kGrad, "x.copy"));
    Tensor ids = be.empty({7}, DType::kI64, Category::kActivation, "ids");
    be.fill(ids, 3.0f);
    kept.push_back(be.cast(ids, DType::kF32, Category::kActivation, "ids.fp32"));
    kept.erase(kept.begin() + 1);                               // frees out of allocation order
    be.cast(x, DType::kBF16, Category::kWorkspace, "dropped");  // freed at once
  });
}

TEST(MetaParity, Add) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor a = input(be, {130, 65}, dtype, "a", 1);
      Tensor b = input(be, {130, 65}, dtype, "b", 2);
      Tensor out = be.empty({130, 65}, dtype, Category::kActivation, "out");
      be.add(a, b, out);
      be.add(a, b, a);
      be.add(b, b, b);
    }
  });
}

TEST(MetaParity, Gemm) {
  expect_same_events([](Backend& be) {
    struct Call {
      int64_t m, n, k;
      bool ta, tb;
      DType ab, c;
      float alpha, beta;
    };
    const Call calls[] = {
        {17, 65, 130, false, false, DType::kF32, DType::kF32, 1.0f, 0.0f},
        {17, 65, 130, true, false, DType::kF32, DType::kF32, 0.5f, 1.0f},
        {17, 65, 130, false, true, DType::kF32, DType::kF32, 1.0f, 0.25f},
        {17, 65, 130, true, true, DType::kF32, DType::kF32, -1.0f, 0.0f},
        {65, 3, 17, false, true, DType::kBF16, DType::kF32, 1.0f, 0.0f},
        {65, 3, 17, true, false, DType::kBF16, DType::kBF16, 1.0f, 1.0f},
        {65, 3, 17, false, false, DType::kBF16, DType::kBF16, 1.0f, 0.0f},
        // Operands over 1 MiB: workspace (when widened) comes from the large pool.
        {512, 64, 2048, false, true, DType::kBF16, DType::kBF16, 1.0f, 0.0f},
        {256, 1024, 1024, false, false, DType::kF32, DType::kF32, 1.0f, 0.0f},
        {4, 6, 0, false, false, DType::kBF16, DType::kBF16, 1.0f, 0.5f},  // k = 0
        {0, 6, 5, false, false, DType::kF32, DType::kF32, 1.0f, 0.0f},    // m = 0
    };
    for (const Call& call : calls) {
      Tensor a =
          input(be, call.ta ? Shape{call.k, call.m} : Shape{call.m, call.k}, call.ab, "a", 1);
      Tensor b =
          input(be, call.tb ? Shape{call.n, call.k} : Shape{call.k, call.n}, call.ab, "b", 2);
      Tensor c = input(be, {call.m, call.n}, call.c, "c", 3);
      be.gemm(a, call.ta, b, call.tb, c, call.alpha, call.beta);
      be.gemm(a, call.ta, b, call.tb, c, call.alpha, call.beta);  // cached plan, same events
    }
  });
}

// Every rejected call throws the same message on both backends and leaves no
// allocation behind on either.
TEST(MetaParity, RejectedCallsAllocateNothingAndSayTheSame) {
  const std::vector<Scenario> bad_calls = {
      [](Backend& be) {
        Tensor a = be.empty({4, 8}, DType::kF32, Category::kActivation, "resid");
        Tensor b = be.empty({4, 9}, DType::kF32, Category::kActivation, "attn_out");
        be.add(a, b, a);
      },
      [](Backend& be) {
        Tensor x = be.empty({4, 8}, DType::kF32, Category::kActivation, "x");
        be.cast(x, DType::kI32, Category::kActivation, "never");
      },
      [](Backend& be) {
        Tensor x = be.empty({4, 8}, DType::kBF16, Category::kActivation, "x");
        Tensor w = be.empty({9, 8}, DType::kBF16, Category::kParam, "w");
        Tensor y = be.empty({4, 8}, DType::kBF16, Category::kActivation, "y");
        be.gemm(x, false, w, false, y, 1.0f, 0.0f);
      },
      [](Backend& be) {
        Tensor x = be.empty({8, 4}, DType::kF32, Category::kActivation, "x");
        Tensor shifted = x.rows(1, 5);
        be.copy(x.rows(0, 4), shifted);
      },
      [](Backend& be) {
        Tensor x = be.empty({8}, DType::kU8, Category::kActivation, "x");
        be.fill(x, 300.0f);
      },
  };
  for (size_t i = 0; i < bad_calls.size(); ++i) {
    std::string messages[2];
    std::vector<EventRecord> events[2];
    for (int kind = 0; kind < 2; ++kind) {
      BackendUnderTest under_test(kind == 0 ? BackendKind::kCpu : BackendKind::kMeta);
      EventRecorder recorder(under_test.allocator);
      try {
        bad_calls[i](*under_test.backend);
        ADD_FAILURE() << "call " << i << " was accepted";
      } catch (const InternalError& e) {
        messages[kind] = e.what();
      }
      EXPECT_EQ(under_test.allocator.num_live_blocks(), 0u) << "call " << i;
      events[kind] = recorder.events();
    }
    EXPECT_EQ(messages[0], messages[1]) << "call " << i;
    EXPECT_EQ(events[0], events[1]) << "call " << i;
  }
}

TEST(MetaParity, AddShapeMismatchNamesTagsAndShapes) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kMeta}) {
    BackendUnderTest under_test(kind);
    Backend& be = *under_test.backend;
    Tensor a = be.empty({4, 8}, DType::kF32, Category::kActivation, "block.2.resid");
    Tensor b = be.empty({4, 9}, DType::kF32, Category::kActivation, "block.2.mlp_out");
    try {
      be.add(a, b, a);
      FAIL() << "expected InternalError";
    } catch (const InternalError& e) {
      EXPECT_EQ(std::string(e.what()),
                "add: shape mismatch: a 'block.2.resid' fp32 [4, 8] vs b 'block.2.mlp_out' fp32 "
                "[4, 9]");
    }
  }
}

TEST(MetaParity, TensorsOfAnotherBackendAreRejected) {
  BackendUnderTest cpu(BackendKind::kCpu);
  BackendUnderTest meta(BackendKind::kMeta);
  Tensor on_meta = meta.backend->empty({4}, DType::kF32, Category::kActivation, "m");
  EXPECT_THROW(cpu.backend->fill(on_meta, 1.0f), InternalError);  // would write a virtual address
  Tensor on_cpu = cpu.backend->empty({4}, DType::kF32, Category::kActivation, "c");
  EXPECT_THROW(meta.backend->fill(on_cpu, 1.0f), InternalError);
}

// The scratchpad oneDNN asks for is a workspace tensor held for the call. On
// machines where no gemm needs one (AVX2) this is the only test that sees it,
// so it drives allocate_gemm_scratch with a plan that asks for one.
TEST(GemmWorkspace, ScratchpadIsAWorkspaceTensorHeldForTheCall) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kMeta}) {
    BackendUnderTest under_test(kind);
    Tensor a = under_test.backend->empty({2, 2}, DType::kF32, Category::kActivation, "a");
    EventRecorder recorder(under_test.allocator);
    GemmPlan plan;
    plan.route = GemmRoute::kNative;
    plan.scratchpad_bytes = 4099;
    {
      SharedGemmOperands none;
      GemmScratch scratch = allocate_gemm_scratch(*under_test.backend, plan, a, a, a, none);
      EXPECT_EQ(scratch.scratchpad.nbytes(), 4099u);
      EXPECT_EQ(under_test.allocator.live(Category::kWorkspace), Allocator::round_size(4099));
    }
    EXPECT_EQ(under_test.allocator.live(Category::kWorkspace), 0u);
    const auto& events = recorder.events();
    ASSERT_EQ(events.size(), 2u);  // a's small-pool segment has room: block, free
    EXPECT_EQ(events[0], EventRecord(MemoryAction::kAlloc, Allocator::round_size(4099),
                                     Category::kWorkspace, "gemm.scratchpad"));
    EXPECT_EQ(events[1], EventRecord(MemoryAction::kFree, Allocator::round_size(4099),
                                     Category::kWorkspace, "gemm.scratchpad"));
  }
}

// cpu gemm allocates exactly the workspace its plan reports, so the size meta
// asks oneDNN for is the size cpu uses (whatever this machine's ISA makes it).
TEST(GemmWorkspace, CpuAllocatesWhatThePlanReports) {
  GemmPlans plans;
  for (DType ab : {DType::kF32, DType::kBF16}) {
    for (int64_t size : {1, 17, 130, 512}) {
      GemmKey key = make_gemm_key({size, 2 * size, size + 3}, false, true, ab, ab, 1.0f, 0.0f);
      const GemmPlan& plan = plans.get(key);
      BackendUnderTest cpu(BackendKind::kCpu);
      Tensor a = input(*cpu.backend, {key.m, key.k}, ab, "a", 1);
      Tensor b = input(*cpu.backend, {key.n, key.k}, ab, "b", 2);
      Tensor c = cpu.backend->empty({key.m, key.n}, ab, Category::kActivation, "c");
      EventRecorder recorder(cpu.allocator);
      cpu.backend->gemm(a, false, b, true, c, 1.0f, 0.0f);
      std::vector<std::string> workspace;
      for (const EventRecord& e : recorder.events()) {
        if (std::get<0>(e) != MemoryAction::kAlloc) continue;
        EXPECT_EQ(std::get<2>(e), Category::kWorkspace);
        workspace.push_back(std::get<3>(e));
        if (std::get<3>(e) == "gemm.scratchpad") {
          EXPECT_EQ(std::get<1>(e), Allocator::round_size(plan.scratchpad_bytes));
        }
      }
      std::vector<std::string> expected;
      if (plan.route == GemmRoute::kWidened)
        expected = {"gemm.a_fp32", "gemm.b_fp32", "gemm.c_fp32"};
      if (plan.scratchpad_bytes > 0) expected.push_back("gemm.scratchpad");
      EXPECT_EQ(workspace, expected) << name_of(ab) << " size " << size;
      EXPECT_EQ(cpu.allocator.live(Category::kWorkspace), 0u);
    }
  }
}

}  // namespace
}  // namespace headroom::backend_test
