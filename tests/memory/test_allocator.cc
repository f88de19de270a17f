// One test per allocator rule of docs/allocator.md, on real host memory
// (the host source) unless the rule is about addresses only.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "memory/allocator.h"
#include "memory/postmortem.h"
#include "memory/segment_source.h"
#include "util/error.h"

namespace headroom {
namespace {

constexpr uint64_t MiB = 1 << 20;

struct Recorder : MemoryObserver {
  std::vector<MemoryEvent> events;
  void on_memory_event(const MemoryEvent& e) override { events.push_back(e); }
  int count(MemoryAction action) const {
    int n = 0;
    for (const MemoryEvent& e : events)
      n += e.action == action;
    return n;
  }
};

Allocator caching(uint64_t capacity = 0) {
  return Allocator(make_host_source(), AllocatorOptions{AllocatorPolicy::kCaching, capacity});
}

char* addr(const Allocation& a) {
  return static_cast<char*>(a.address);
}

TEST(CachingRules, SizesRoundUpTo512Bytes) {
  EXPECT_EQ(Allocator::round_size(1), 512u);
  EXPECT_EQ(Allocator::round_size(512), 512u);
  EXPECT_EQ(Allocator::round_size(513), 1024u);
  Allocator a = caching();
  Allocation x = a.allocate(1000, Category::kActivation, "x");
  EXPECT_EQ(x.bytes, 1024u);
  EXPECT_EQ(a.allocated(), 1024u) << "allocated counts rounded bytes, as PyTorch does";
  a.free(x);
}

TEST(CachingRules, SmallRequestsShareTwoMiBSegments) {
  Allocator a = caching();
  Allocation x = a.allocate(300 * 1024, Category::kActivation, "x");
  Allocation y = a.allocate(kSmallSize, Category::kActivation, "y");  // 1 MiB is still small
  EXPECT_EQ(a.num_segments(), 1u);
  EXPECT_EQ(a.reserved(), kSmallBuffer);
  EXPECT_EQ(addr(y) - addr(x), 300 * 1024) << "carved from the same segment, in order";
  Allocation z = a.allocate(800 * 1024, Category::kActivation, "z");  // 1.3 MiB used: no room
  EXPECT_EQ(a.num_segments(), 2u);
  EXPECT_EQ(a.reserved(), 2 * kSmallBuffer);
  a.free(x), a.free(y), a.free(z);
}

TEST(CachingRules, MidSizedRequestsGetTwentyMiBSegments) {
  Allocator a = caching();
  Allocation x = a.allocate(MiB + 1, Category::kActivation, "x");  // just above small
  EXPECT_EQ(a.reserved(), kLargeBuffer);
  Allocation y = a.allocate(9 * MiB, Category::kActivation, "y");
  EXPECT_EQ(a.num_segments(), 1u) << "the 20 MiB segment still had 19 MiB free";
  EXPECT_EQ(a.reserved(), kLargeBuffer);
  a.free(x), a.free(y);
}

TEST(CachingRules, LargeRequestsRoundToTwoMiB) {
  EXPECT_EQ(Allocator::segment_size_for(10 * MiB), 10 * MiB);
  EXPECT_EQ(Allocator::segment_size_for(10 * MiB + 512), 12 * MiB);
  Allocator a = caching();
  Allocation x = a.allocate(11 * MiB + 1, Category::kParam, "w");
  EXPECT_EQ(a.reserved(), 12 * MiB);
  EXPECT_EQ(x.bytes, 12 * MiB) << "the 1 MiB tail is not worth a split (needs > 1 MiB)";
  a.free(x);
}

TEST(CachingRules, BestFitPicksTheSmallestCachedBlockThatFits) {
  Allocator a = caching();
  Allocation s12 = a.allocate(12 * MiB, Category::kActivation, "a");
  Allocation s16 = a.allocate(16 * MiB, Category::kActivation, "b");
  Allocation s14 = a.allocate(14 * MiB, Category::kActivation, "c");
  char* expected = addr(s14);
  a.free(s12), a.free(s16), a.free(s14);
  EXPECT_EQ(a.allocated(), 0u);
  EXPECT_EQ(a.reserved(), 42 * MiB) << "freed segments stay cached and count as reserved";
  Allocation r = a.allocate(13 * MiB, Category::kActivation, "d");
  EXPECT_EQ(addr(r), expected);
  EXPECT_EQ(a.num_segments(), 3u) << "no new segment for a request the cache can serve";
  a.free(r);
}

TEST(CachingRules, LargeBlocksSplitOnlyWhenMoreThanOneMiBRemains) {
  Allocator a = caching();
  Allocation x = a.allocate(9 * MiB, Category::kActivation, "x");  // 20 MiB segment, 11 MiB tail
  EXPECT_EQ(x.bytes, 9 * MiB);
  Allocation y = a.allocate(10 * MiB + 512 * 1024, Category::kActivation, "y");
  EXPECT_EQ(addr(y), addr(x) + 9 * MiB) << "the 11 MiB free tail was reused";
  EXPECT_EQ(y.bytes, 11 * MiB) << "0.5 MiB would remain: not split, so it counts as allocated";
  EXPECT_EQ(a.allocated(), 20 * MiB);
  a.free(x), a.free(y);
}

TEST(CachingRules, SmallBlocksSplitWhenAtLeast512BytesRemain) {
  Allocator a = caching();
  Allocation s1 = a.allocate(kSmallSize, Category::kActivation, "s1");  // tail: 1 MiB
  Allocation s2 = a.allocate(kSmallSize - 512, Category::kActivation, "s2");
  EXPECT_EQ(addr(s2), addr(s1) + kSmallSize);
  Allocation s3 = a.allocate(1, Category::kActivation, "s3");
  EXPECT_EQ(addr(s3), addr(s2) + kSmallSize - 512) << "the last 512 B became a block";
  EXPECT_EQ(a.num_segments(), 1u);
  a.free(s1), a.free(s2), a.free(s3);
}

TEST(CachingRules, FreedNeighboursMergeBackIntoAWholeSegment) {
  Allocator a = caching();
  Allocation x = a.allocate(512 * 1024, Category::kActivation, "x");
  Allocation y = a.allocate(512 * 1024, Category::kActivation, "y");
  Allocation z = a.allocate(512 * 1024, Category::kActivation, "z");
  a.free(x);
  a.free(z);
  a.free(y);  // merges with both neighbours
  Allocation whole = a.allocate(kSmallSize, Category::kActivation, "whole");
  EXPECT_EQ(addr(whole), addr(x)) << "after merging, the segment's start serves 1 MiB";
  a.free(whole);
  a.empty_cache();
  EXPECT_EQ(a.reserved(), 0u) << "a fully merged segment is releasable";
  EXPECT_EQ(a.num_segments(), 0u);
}

TEST(CachingRules, EmptyCacheKeepsSegmentsWithLiveBlocks) {
  Allocator a = caching();
  Allocation live = a.allocate(4 * MiB, Category::kParam, "live");
  Allocation dead = a.allocate(12 * MiB, Category::kActivation, "dead");
  a.free(dead);
  a.empty_cache();
  EXPECT_EQ(a.reserved(), kLargeBuffer);
  a.free(live);
}

TEST(CachingRules, CacheIsReleasedAndRetriedBeforeOom) {
  Allocator a = caching(40 * MiB);
  Recorder rec;
  a.add_observer(&rec);
  Allocation x = a.allocate(12 * MiB, Category::kActivation, "x");
  a.free(x);                                                        // 12 MiB cached
  Allocation y = a.allocate(30 * MiB, Category::kActivation, "y");  // 12 + 30 > 40
  EXPECT_EQ(a.reserved(), 30 * MiB);
  EXPECT_EQ(rec.count(MemoryAction::kSegmentFree), 1);
  EXPECT_EQ(rec.count(MemoryAction::kOom), 0);
  a.free(y);
  a.remove_observer(&rec);
}

TEST(Oom, CapacityRefusalCarriesThePostmortem) {
  Allocator a = caching(40 * MiB);
  Recorder rec;
  a.add_observer(&rec);
  a.set_step(7);
  Allocation w = a.allocate(30 * MiB, Category::kParam, "block.3.mlp.w_up");
  for (int i = 0; i < 3; ++i)
    a.free(a.allocate(MiB, Category::kActivation, "scratch"));
  PhaseScope scope(a, Phase::kLoss, 12);
  try {
    a.allocate(12 * MiB, Category::kLogits, "loss.chunk.7.logits", "fp32 [1024, 3072]");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& oom) {
    const Postmortem& pm = oom.postmortem();
    EXPECT_EQ(oom.code(), ExitCode::kOutOfMemory);
    EXPECT_EQ(pm.requested_bytes, 12 * MiB);
    EXPECT_EQ(pm.rounded_bytes, 12 * MiB);
    EXPECT_EQ(pm.segment_bytes, 12 * MiB);
    EXPECT_EQ(pm.tag, "loss.chunk.7.logits");
    EXPECT_EQ(pm.category, Category::kLogits);
    EXPECT_EQ(pm.phase, Phase::kLoss);
    EXPECT_EQ(pm.layer, 12);
    EXPECT_EQ(pm.step, 7);
    EXPECT_EQ(pm.allocated, 30 * MiB);
    EXPECT_EQ(pm.reserved, 30 * MiB) << "the cached small segment was released by the retry";
    EXPECT_EQ(pm.capacity, 40 * MiB);
    EXPECT_TRUE(pm.capacity_limited);
    ASSERT_EQ(pm.largest_live.size(), 1u);
    EXPECT_EQ(pm.largest_live[0].tag, "block.3.mlp.w_up");
    EXPECT_EQ(pm.largest_live[0].category, Category::kParam);
    EXPECT_EQ(pm.live_by_category[static_cast<int>(Category::kParam)], 30 * MiB);
    std::string text = format_postmortem(pm);
    EXPECT_NE(text.find("OutOfMemory: loss.chunk.7.logits needs 12.0 MiB (fp32 [1024, 3072]) in "
                        "phase loss, layer 12, step 7"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("block.3.mlp.w_up"), std::string::npos);
  }
  EXPECT_EQ(rec.count(MemoryAction::kOom), 1);
  EXPECT_EQ(rec.events.back().action, MemoryAction::kOom);
  EXPECT_EQ(a.allocated(), 30 * MiB) << "the failed request left the allocator unchanged";
  a.free(w);
  a.remove_observer(&rec);
}

// A source that refuses every segment and, like cudaMemGetInfo, knows the
// device's free and total bytes: a real (not capacity) OOM on a device.
class RefusingDeviceSource final : public SegmentSource {
 public:
  void* map(uint64_t /*bytes*/) override { return nullptr; }
  void unmap(void* /*address*/, uint64_t /*bytes*/) override {}
  std::string_view name() const override { return "cuda"; }
  bool is_host_accessible() const override { return false; }
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override {
    *free_bytes = 3 * MiB;
    *total_bytes = 80 * MiB;
    return true;
  }
};

TEST(Oom, ASourceRefusalCarriesTheDriversFigures) {
  Allocator a(std::make_unique<RefusingDeviceSource>(), AllocatorOptions{});
  try {
    a.allocate(12 * MiB, Category::kLogits, "loss.chunk.0.logits");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& oom) {
    const Postmortem& pm = oom.postmortem();
    EXPECT_FALSE(pm.capacity_limited);
    EXPECT_EQ(pm.device_free, 3 * MiB);
    EXPECT_EQ(pm.device_total, 80 * MiB);
    const std::string text = format_postmortem(pm);
    EXPECT_NE(text.find("device (cudaMemGetInfo): 3.0 MiB free of 80.0 MiB; in use outside this "
                        "allocator 77.0 MiB"),
              std::string::npos)
        << text;
  }
}

TEST(Oom, AHostSourceHasNoDriverFigures) {
  AllocatorOptions options;
  options.capacity = 1 * MiB;
  Allocator a(make_host_source(), options);
  try {
    a.allocate(2 * MiB, Category::kLogits, "too.big");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& oom) {
    EXPECT_EQ(oom.postmortem().device_total, 0u);
    EXPECT_EQ(format_postmortem(oom.postmortem()).find("cudaMemGetInfo"), std::string::npos);
  }
}

TEST(Oom, TopBlocksAreTheTenLargestLargestFirst) {
  Allocator a = caching(64 * MiB);
  std::vector<Allocation> live;
  for (int i = 1; i <= 12; ++i)
    live.push_back(a.allocate(static_cast<uint64_t>(i) * 1024 * 64, Category::kActivation,
                              "a" + std::to_string(i)));
  try {
    a.allocate(100 * MiB, Category::kActivation, "too.big");
    FAIL();
  } catch (const OutOfMemory& oom) {
    const auto& top = oom.postmortem().largest_live;
    ASSERT_EQ(top.size(), 10u);
    EXPECT_EQ(top.front().tag, "a12");
    EXPECT_EQ(top.back().tag, "a3");
  }
  for (auto& x : live)
    a.free(x);
}

TEST(Oom, ARealSourceFailureIsAnOomToo) {
  Allocator a = caching();  // no capacity: the host itself must refuse
  try {
    a.allocate(uint64_t{1} << 62, Category::kActivation, "absurd");
    FAIL();
  } catch (const OutOfMemory& oom) {
    EXPECT_FALSE(oom.postmortem().capacity_limited);
    EXPECT_EQ(oom.postmortem().source, "host");
  }
}

TEST(ExactPolicy, OneSegmentPerBlockNoRounding) {
  Allocator a(make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  Allocation x = a.allocate(1000, Category::kActivation, "x");
  Allocation y = a.allocate(3 * MiB + 7, Category::kActivation, "y");
  EXPECT_EQ(x.bytes, 1000u);
  EXPECT_EQ(a.allocated(), 3 * MiB + 1007);
  EXPECT_EQ(a.reserved(), a.allocated());
  a.free(x);
  EXPECT_EQ(a.reserved(), 3 * MiB + 7) << "exact returns memory at once";
  a.free(y);
  EXPECT_EQ(a.reserved(), 0u);
  EXPECT_EQ(a.peak_reserved(), 3 * MiB + 1007);
}

TEST(ExactPolicy, CapacityIsEnforcedOnExactBytes) {
  Allocator a(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 10 * MiB});
  Allocation x = a.allocate(6 * MiB, Category::kParam, "x");
  EXPECT_THROW(a.allocate(4 * MiB + 1, Category::kGrad, "y"), OutOfMemory);
  Allocation y = a.allocate(4 * MiB, Category::kGrad, "y");
  a.free(x), a.free(y);
}

TEST(Accounting, LiveAndPeakPerCategoryAndPhase) {
  Allocator a(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  Allocation p = a.allocate(100, Category::kParam, "p");
  a.set_phase(Phase::kForward);
  Allocation act = a.allocate(300, Category::kActivation, "act");
  a.set_phase(Phase::kLoss);
  Allocation logits = a.allocate(500, Category::kLogits, "logits");
  a.free(logits);
  a.set_phase(Phase::kBackward);
  a.free(act);
  Allocation g = a.allocate(100, Category::kGrad, "g");
  const MemoryStats& s = a.stats();
  EXPECT_EQ(s.allocated, 200u);
  EXPECT_EQ(s.peak_allocated, 900u);
  EXPECT_EQ(a.peak(Category::kLogits), 500u);
  EXPECT_EQ(a.live(Category::kLogits), 0u);
  EXPECT_EQ(s.peak_allocated_by_phase[static_cast<int>(Phase::kInit)], 100u);
  EXPECT_EQ(s.peak_allocated_by_phase[static_cast<int>(Phase::kForward)], 400u);
  EXPECT_EQ(s.peak_allocated_by_phase[static_cast<int>(Phase::kLoss)], 900u);
  EXPECT_EQ(s.peak_allocated_by_phase[static_cast<int>(Phase::kBackward)], 200u);
  EXPECT_EQ(s.by_category_at_peak[static_cast<int>(Category::kLogits)], 500u);
  EXPECT_EQ(s.by_category_at_peak[static_cast<int>(Category::kActivation)], 300u);

  a.reset_peaks();
  EXPECT_EQ(a.peak_allocated(), 200u);
  EXPECT_EQ(a.peak(Category::kLogits), 0u);
  EXPECT_EQ(a.stats().peak_allocated_by_phase[static_cast<int>(Phase::kLoss)], 0u);
  EXPECT_EQ(a.stats().peak_allocated_by_phase[static_cast<int>(Phase::kBackward)], 200u);
  a.free(p), a.free(g);
}

TEST(Accounting, PhaseScopeRestoresContextOnEveryExit) {
  Allocator a(make_virtual_source(), AllocatorOptions{});
  a.set_phase(Phase::kForward);
  a.set_layer(2);
  try {
    PhaseScope scope(a, Phase::kLoss, 5);
    EXPECT_EQ(a.phase(), Phase::kLoss);
    throw std::runtime_error("x");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(a.phase(), Phase::kForward);
  EXPECT_EQ(a.layer(), 2);
}

TEST(Events, EveryActionIsReportedInOrderWithContext) {
  Allocator a(make_virtual_source(), AllocatorOptions{});
  Recorder rec;
  a.add_observer(&rec);
  a.set_step(3);
  {
    PhaseScope scope(a, Phase::kBackward, 4);
    Allocation x = a.allocate(100, Category::kGrad, "block.4.grad");
    a.free(x);
  }
  a.empty_cache();
  ASSERT_EQ(rec.events.size(), 4u);
  EXPECT_EQ(rec.events[0].action, MemoryAction::kSegmentAlloc);
  EXPECT_EQ(rec.events[0].bytes, kSmallBuffer);
  EXPECT_EQ(rec.events[1].action, MemoryAction::kAlloc);
  EXPECT_EQ(rec.events[1].bytes, 512u);
  EXPECT_EQ(rec.events[1].phase, Phase::kBackward);
  EXPECT_EQ(rec.events[1].layer, 4);
  EXPECT_EQ(rec.events[1].step, 3);
  EXPECT_EQ(a.tags()[rec.events[1].tag_id], "block.4.grad");
  EXPECT_EQ(rec.events[2].action, MemoryAction::kFree);
  EXPECT_EQ(rec.events[3].action, MemoryAction::kSegmentFree);
  for (size_t i = 0; i < rec.events.size(); ++i)
    EXPECT_EQ(rec.events[i].seq, i);
  EXPECT_EQ(a.intern_tag("block.4.grad"), rec.events[1].tag_id) << "tags are interned once";
  a.remove_observer(&rec);
}

TEST(Misuse, DoubleFreeIsCaught) {
  Allocator a(make_virtual_source(), AllocatorOptions{});
  Allocation x = a.allocate(100, Category::kGrad, "g");
  a.free(x);
  EXPECT_THROW(a.free(x), InternalError);
}

TEST(Misuse, ZeroByteRequestsOwnNothing) {
  Allocator a(make_virtual_source(), AllocatorOptions{});
  Allocation x = a.allocate(0, Category::kComm, "padding");
  EXPECT_EQ(x.address, nullptr);
  EXPECT_EQ(a.allocated(), 0u);
  a.free(x);
}

TEST(MetaSource, PlansEightyGiBWithoutTouchingMemory) {
  Allocator a(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kCaching, 80ull << 30});
  std::vector<Allocation> blocks;
  for (int i = 0; i < 79; ++i)
    blocks.push_back(a.allocate(1ull << 30, Category::kParam, "w" + std::to_string(i)));
  EXPECT_EQ(a.allocated(), 79ull << 30);
  EXPECT_THROW(a.allocate(2ull << 30, Category::kParam, "one.too.many"), OutOfMemory);
  for (auto& b : blocks)
    a.free(b);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Plan = run needs the same decisions whatever the addresses: run one
// allocation pattern on host and on virtual memory and compare every event
// but the address.
TEST(Determinism, HostAndVirtualSourcesMakeTheSameDecisions) {
  auto pattern = [](Allocator& a) {
    std::vector<Allocation> keep, drop;
    for (int i = 0; i < 40; ++i) {
      uint64_t size = (static_cast<uint64_t>(i * 7919) % 23 + 1) * 512 * 1024;
      (i % 3 ? drop : keep).push_back(a.allocate(size, Category::kActivation, "x"));
    }
    for (auto& x : drop)
      a.free(x);
    for (int i = 0; i < 20; ++i)
      keep.push_back(a.allocate((static_cast<uint64_t>(i) % 5 + 1) * MiB, Category::kGrad, "y"));
    a.empty_cache();
    for (auto& x : keep)
      a.free(x);
    a.empty_cache();
  };
  Allocator host(make_host_source(), AllocatorOptions{});
  Allocator meta(make_virtual_source(), AllocatorOptions{});
  Recorder on_host, on_meta;
  host.add_observer(&on_host);
  meta.add_observer(&on_meta);
  pattern(host);
  pattern(meta);
  ASSERT_EQ(on_host.events.size(), on_meta.events.size());
  for (size_t i = 0; i < on_host.events.size(); ++i) {
    const MemoryEvent& h = on_host.events[i];
    const MemoryEvent& m = on_meta.events[i];
    ASSERT_EQ(h.action, m.action) << "event " << i;
    ASSERT_EQ(h.bytes, m.bytes) << "event " << i;
    ASSERT_EQ(h.tag_id, m.tag_id) << "event " << i;
  }
  host.remove_observer(&on_host);
  meta.remove_observer(&on_meta);
}

}  // namespace
}  // namespace headroom
