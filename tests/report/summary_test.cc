// summarize_trace / replay_memory_events on traces whose figures are known by
// construction: a hand-written event stream with chosen per-category peaks.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "memory/postmortem.h"
#include "report/summary.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"
#include "util/bytes.h"

namespace headroom {
namespace {

using testing::TempDir;

struct EventStream {
  std::vector<MemoryEvent> events;
  void add(MemoryAction action, Category category, uint64_t bytes, uint32_t tag_id = 0) {
    MemoryEvent e{};
    e.seq = events.size();
    e.t_ns = static_cast<int64_t>(events.size()) * 100;
    e.step = 0;
    e.action = action;
    e.bytes = bytes;
    e.address = 0x1000 + events.size() * 0x100;
    e.category = category;
    e.tag_id = tag_id;
    e.phase = Phase::kForward;
    e.layer = -1;
    events.push_back(e);
  }
};

// allocated over time: 8, 11, 13, 10, 40 (peak: param 8 + activation 2 +
// logits 30), 10, 16 (activation's own peak, 8), ..., 0.
// reserved: 20, 60 (peak), 20.
EventStream known_stream() {
  using A = MemoryAction;
  EventStream s;
  s.add(A::kSegmentAlloc, Category::kParam, 20 * kMiB);
  s.add(A::kAlloc, Category::kParam, 8 * kMiB);
  s.add(A::kAlloc, Category::kActivation, 3 * kMiB, 1);
  s.add(A::kAlloc, Category::kActivation, 2 * kMiB, 1);
  s.add(A::kFree, Category::kActivation, 3 * kMiB, 1);
  s.add(A::kSegmentAlloc, Category::kLogits, 40 * kMiB, 2);
  s.add(A::kAlloc, Category::kLogits, 30 * kMiB, 2);
  s.add(A::kFree, Category::kLogits, 30 * kMiB, 2);
  s.add(A::kAlloc, Category::kActivation, 6 * kMiB, 1);
  s.add(A::kOom, Category::kLogits, 100 * kMiB, 2);  // refused: changes nothing
  s.add(A::kSegmentFree, Category::kLogits, 40 * kMiB, 2);
  s.add(A::kFree, Category::kActivation, 6 * kMiB, 1);
  s.add(A::kFree, Category::kActivation, 2 * kMiB, 1);
  s.add(A::kFree, Category::kParam, 8 * kMiB);
  return s;
}

std::string write_trace(const TempDir& dir, const std::vector<MemoryEvent>& events,
                        bool record_events, int steps, const Postmortem* oom = nullptr) {
  const std::string path = dir.file("trace.rank3.h5");
  TraceWriter writer(path, testing::sample_header(), record_events);
  for (const MemoryEvent& e : events)
    writer.on_memory_event(e);
  for (int s = 0; s < steps; ++s)
    writer.append_step(testing::make_step(s), {});
  writer.flush({"param.embed", "activation.block.0", "loss.logits"});
  if (oom != nullptr) writer.write_oom(*oom);
  return path;
}

// The summary line whose first word is `label`, or "" if none.
std::string line_starting(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, label.size() + 1, label + " ") == 0)
      return line;
  }
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "lacks \"" << part << "\" in:\n" << text;
}

TEST(Summary, ReplayFindsKnownPeaks) {
  TempDir dir;
  TraceReader trace = TraceReader::open(write_trace(dir, known_stream().events, true, 0));
  MemoryReplay r = replay_memory_events(trace);
  EXPECT_EQ(r.events, 14u);
  EXPECT_EQ(r.peak_allocated, 40 * kMiB);
  EXPECT_EQ(r.peak_reserved, 60 * kMiB);
  auto at = [](Category c) { return static_cast<int>(c); };
  EXPECT_EQ(r.peak_by_category[at(Category::kParam)], 8 * kMiB);
  EXPECT_EQ(r.peak_by_category[at(Category::kActivation)], 8 * kMiB);
  EXPECT_EQ(r.peak_by_category[at(Category::kLogits)], 30 * kMiB);
  EXPECT_EQ(r.peak_by_category[at(Category::kGrad)], 0u);
  EXPECT_EQ(r.at_peak_by_category[at(Category::kParam)], 8 * kMiB);
  EXPECT_EQ(r.at_peak_by_category[at(Category::kActivation)], 2 * kMiB);
  EXPECT_EQ(r.at_peak_by_category[at(Category::kLogits)], 30 * kMiB);
  EXPECT_EQ(r.final_allocated, 0u);
  EXPECT_EQ(r.final_reserved, 20 * kMiB);
  EXPECT_EQ(r.unmatched_frees, 0u);
}

TEST(Summary, ReplayAcrossBatchesMatchesOneBatch) {
  // The replay streams; a peak that spans a batch boundary must still count.
  TempDir dir;
  EventStream s;
  for (int i = 0; i < 3000; ++i)
    s.add(MemoryAction::kAlloc, Category::kGrad, 512);
  for (int i = 0; i < 3000; ++i)
    s.add(MemoryAction::kFree, Category::kGrad, 512);
  TraceReader trace = TraceReader::open(write_trace(dir, s.events, true, 0));
  MemoryReplay whole = replay_memory_events(trace);
  MemoryReplay batched = replay_memory_events(trace, 1000);
  for (const MemoryReplay& r : {whole, batched}) {
    EXPECT_EQ(r.events, 6000u);
    EXPECT_EQ(r.peak_allocated, 3000u * 512);
    EXPECT_EQ(r.peak_by_category[static_cast<int>(Category::kGrad)], 3000u * 512);
    EXPECT_EQ(r.final_allocated, 0u);
  }
}

TEST(Summary, FreesWithoutAllocsAreCountedNotWrapped) {
  TempDir dir;
  EventStream s;
  s.add(MemoryAction::kFree, Category::kParam, 4096);  // made before the trace began
  s.add(MemoryAction::kAlloc, Category::kParam, 1024);
  TraceReader trace = TraceReader::open(write_trace(dir, s.events, true, 0));
  MemoryReplay r = replay_memory_events(trace);
  EXPECT_EQ(r.unmatched_frees, 1u);
  EXPECT_EQ(r.peak_allocated, 1024u);
  EXPECT_EQ(r.final_allocated, 1024u);
  expect_contains(summarize_trace(trace), "1 frees had no matching alloc");
}

TEST(Summary, TextShowsHeaderStepsAndPerCategoryPeaks) {
  TempDir dir;
  const std::string path = write_trace(dir, known_stream().events, true, 3);
  std::string text = summarize_trace(TraceReader::open(path));
  SCOPED_TRACE(text);

  EXPECT_EQ(line_starting(text, "trace"), "trace       " + path);
  EXPECT_EQ(line_starting(text, "run"), "run         qwen3-8b-lora-α");
  EXPECT_EQ(line_starting(text, "rank"), "rank        3 of 4");
  EXPECT_EQ(line_starting(text, "backend"), "backend     meta, device virtual H200");
  EXPECT_EQ(line_starting(text, "capacity"), "capacity    " + format_bytes_exact(80 * kGiB));
  EXPECT_EQ(line_starting(text, "schema"), "schema      1 (headroom 9.8.7-test)");
  EXPECT_EQ(line_starting(text, "config"), "config      5 lines of TOML in attribute /config_toml");
  // make_step: loss 10.5 - 0.25 * step; odd steps are skipped. A meta trace
  // (a plan) has no loss to show, whatever its rows hold.
  EXPECT_EQ(line_starting(text, "steps"), "steps       3, last: step 2, 1 skipped (non-finite)");

  expect_contains(line_starting(text, "memory"), "14 events replayed, 3 tags");
  expect_contains(line_starting(text, "peak allocated"), format_bytes_exact(40 * kMiB));
  expect_contains(line_starting(text, "peak reserved"), format_bytes_exact(60 * kMiB));

  std::string activation = line_starting(text, "activation");
  ASSERT_FALSE(activation.empty());
  // peak column, then the at-peak-allocated column.
  size_t peak = activation.find(format_bytes_exact(8 * kMiB));
  size_t at_peak = activation.find(format_bytes_exact(2 * kMiB));
  EXPECT_NE(peak, std::string::npos);
  EXPECT_NE(at_peak, std::string::npos);
  EXPECT_LT(peak, at_peak);
  expect_contains(line_starting(text, "logits"), format_bytes_exact(30 * kMiB));
  expect_contains(line_starting(text, "param"), format_bytes_exact(8 * kMiB));
  // Categories that never allocated stay out of the table.
  EXPECT_EQ(line_starting(text, "comm"), "");
  EXPECT_EQ(line_starting(text, "grad"), "");
  EXPECT_EQ(text.find("OutOfMemory"), std::string::npos);
}

TEST(Summary, SaysWhenNoEventsWereRecorded) {
  TempDir dir;
  std::string off = summarize_trace(TraceReader::open(write_trace(dir, {}, false, 1)));
  expect_contains(line_starting(off, "memory"), "no events recorded");
  expect_contains(off, "trace.memory_events = false");
  EXPECT_EQ(line_starting(off, "peak allocated"), "");

  TempDir dir2;
  std::string empty = summarize_trace(TraceReader::open(write_trace(dir2, {}, true, 0)));
  expect_contains(line_starting(empty, "memory"), "no events recorded (0 events");
  EXPECT_EQ(line_starting(empty, "steps"), "steps       0 (no step finished)");
}

TEST(Summary, AppendsThePostmortem) {
  TempDir dir;
  // The shared sample, at the first step of this trace's smaller run.
  Postmortem pm = testing::sample_oom();
  pm.step = 0;
  pm.allocated = 16 * kMiB;
  pm.reserved = 20 * kMiB;
  pm.capacity = 64 * kMiB;
  pm.live_by_category = {};
  pm.live_by_category[static_cast<int>(Category::kActivation)] = 8 * kMiB;
  pm.largest_live = {
      {6 * kMiB, "activation.block.0", Category::kActivation, Phase::kForward, 0, 0}};
  const std::string path = write_trace(dir, known_stream().events, true, 1, &pm);
  std::string text = summarize_trace(TraceReader::open(path));
  expect_contains(text, format_postmortem(pm));
  expect_contains(text, "OutOfMemory: loss.chunk.7.logits");
}

}  // namespace
}  // namespace headroom
