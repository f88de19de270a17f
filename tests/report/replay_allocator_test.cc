// The replay of a trace written by observing the real Allocator agrees with
// the allocator's own figures: peak allocated/reserved and per-category peaks.
// This is what lets `headroom report` be trusted on a file alone.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "memory/allocator.h"
#include "memory/postmortem.h"
#include "report/summary.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"
#include "util/bytes.h"

namespace headroom {

// Names the parameter in test listings instead of "4-byte object <00-00 00-00>".
void PrintTo(AllocatorPolicy policy, std::ostream* out) {
  *out << (policy == AllocatorPolicy::kExact ? "exact" : "caching");
}

namespace {

void run_workload(Allocator& allocator, TraceWriter& writer) {
  std::vector<Allocation> params;
  for (int i = 0; i < 4; ++i)
    params.push_back(
        allocator.allocate(3 * kMiB + 100, Category::kParam, "block." + std::to_string(i) + ".w"));
  for (int64_t step = 0; step < 3; ++step) {
    allocator.set_step(step);
    std::vector<Allocation> saved;
    {
      PhaseScope forward(allocator, Phase::kForward, 0);
      for (int i = 0; i < 5; ++i)
        saved.push_back(allocator.allocate(700 * kKiB * (i + 1), Category::kActivation,
                                           "block." + std::to_string(i) + ".saved"));
      saved.push_back(allocator.allocate(12 * kMiB + 7, Category::kLogits, "loss.logits"));
    }
    {
      PhaseScope backward(allocator, Phase::kBackward, 0);
      Allocation grad = allocator.allocate(5 * kMiB, Category::kGrad, "grad.flat");
      for (auto it = saved.rbegin(); it != saved.rend(); ++it)
        allocator.free(*it);
      allocator.free(grad);
    }
    writer.append_step(testing::make_step(step), {});
    writer.flush(allocator.tags());
  }
  allocator.empty_cache();
  for (const Allocation& p : params)
    allocator.free(p);
  writer.flush(allocator.tags());
}

class ReplayMatchesAllocator : public ::testing::TestWithParam<AllocatorPolicy> {};

TEST_P(ReplayMatchesAllocator, PeaksAgree) {
  testing::TempDir dir;
  const std::string path = dir.file("trace.rank0.h5");
  Allocator allocator(make_virtual_source(), AllocatorOptions{GetParam(), 0});
  {
    TraceWriter writer(path, testing::sample_header(), true);
    allocator.add_observer(&writer);
    run_workload(allocator, writer);
    allocator.remove_observer(&writer);
  }
  TraceReader trace = TraceReader::open(path);
  EXPECT_EQ(trace.tags(), allocator.tags());
  MemoryReplay replay = replay_memory_events(trace);
  const MemoryStats& stats = allocator.stats();
  EXPECT_EQ(replay.peak_allocated, stats.peak_allocated);
  EXPECT_EQ(replay.peak_reserved, stats.peak_reserved);
  EXPECT_EQ(replay.peak_by_category, stats.peak_by_category);
  EXPECT_EQ(replay.at_peak_by_category, stats.by_category_at_peak);
  EXPECT_EQ(replay.final_allocated, allocator.allocated());
  EXPECT_EQ(replay.final_reserved, allocator.reserved());
  EXPECT_EQ(replay.unmatched_frees, 0u);
  EXPECT_GT(replay.peak_by_category[static_cast<int>(Category::kLogits)], 12 * kMiB);
}

TEST_P(ReplayMatchesAllocator, OomPostmortemEndToEnd) {
  testing::TempDir dir;
  const std::string path = dir.file("trace.rank0.h5");
  Allocator allocator(make_virtual_source(), AllocatorOptions{GetParam(), 64 * kMiB});
  Postmortem raised;
  {
    TraceWriter writer(path, testing::sample_header(), true);
    allocator.add_observer(&writer);
    Allocation weights = allocator.allocate(40 * kMiB, Category::kParam, "embed.weight");
    try {
      PhaseScope loss(allocator, Phase::kLoss);
      allocator.allocate(30 * kMiB, Category::kLogits, "loss.chunk.0.logits", "fp32 [32, 245760]");
      FAIL() << "64 MiB capacity let 70 MiB through";
    } catch (const OutOfMemory& oom) {
      raised = oom.postmortem();
      // What the CLI does on OOM: tags first, then the postmortem.
      writer.flush(allocator.tags());
      writer.write_oom(raised);
    }
    allocator.remove_observer(&writer);
    allocator.free(weights);
  }
  TraceReader trace = TraceReader::open(path);
  ASSERT_TRUE(trace.has_oom());
  Postmortem read = trace.oom();
  EXPECT_EQ(read.tag, "loss.chunk.0.logits");
  EXPECT_EQ(read.rounded_bytes, raised.rounded_bytes);
  EXPECT_EQ(read.allocated, raised.allocated);
  EXPECT_EQ(read.capacity, 64 * kMiB);
  EXPECT_EQ(read.live_by_category, raised.live_by_category);
  EXPECT_EQ(format_postmortem(read), format_postmortem(raised));
  std::vector<MemoryEvent> events = trace.events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().action, MemoryAction::kOom);
  EXPECT_EQ(trace.tags()[events.back().tag_id], "loss.chunk.0.logits");
  std::string text = summarize_trace(trace);
  EXPECT_NE(text.find(format_postmortem(raised)), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(Policies, ReplayMatchesAllocator,
                         ::testing::Values(AllocatorPolicy::kExact, AllocatorPolicy::kCaching),
                         [](const auto& param_info) {
                           return param_info.param == AllocatorPolicy::kExact ? "exact" : "caching";
                         });

}  // namespace
}  // namespace headroom
