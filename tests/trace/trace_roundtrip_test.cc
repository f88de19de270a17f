// TraceWriter -> file -> TraceReader gives back every record unchanged, across
// several flushes, and buffered data reaches the file only at flush/close.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::make_event;
using testing::make_step;
using testing::sample_header;
using testing::TempDir;

TEST(TraceRoundTrip, HeaderAttributes) {
  TempDir dir;
  const std::string path = dir.file("trace.rank3.h5");
  TraceHeader written = sample_header();
  { TraceWriter writer(path, written, true); }

  TraceReader reader = TraceReader::open(path);
  const TraceHeader& read = reader.header();
  EXPECT_EQ(read.run_name, written.run_name);
  EXPECT_EQ(read.rank, 3);
  EXPECT_EQ(read.world_size, 4);
  EXPECT_EQ(read.backend, "meta");
  EXPECT_EQ(read.device, "virtual H200");
  EXPECT_EQ(read.capacity_bytes, 80ull << 30);
  EXPECT_EQ(read.config_toml, written.config_toml);
  EXPECT_EQ(read.started_at, "2024-05-01T12:34:56Z");
  EXPECT_EQ(read.headroom_version, "9.8.7-test");
  EXPECT_EQ(read.schema_version, kTraceSchemaVersion);
  EXPECT_EQ(reader.path(), path);
  EXPECT_EQ(reader.num_steps(), 0u);
  EXPECT_EQ(reader.num_events(), 0u);
  EXPECT_TRUE(reader.tags().empty());
  EXPECT_FALSE(reader.has_oom());
}

TEST(TraceRoundTrip, StartedAtIsFilledWhenEmpty) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  TraceHeader header = sample_header();
  header.started_at.clear();
  header.headroom_version = TraceHeader{}.headroom_version;
  { TraceWriter writer(path, header, false); }
  TraceReader reader = TraceReader::open(path);
  // "2024-05-01T12:34:56Z": digits everywhere but the separators.
  const std::string& at = reader.header().started_at;
  const std::string shape = "dddd-dd-ddTdd:dd:ddZ";
  ASSERT_EQ(at.size(), shape.size()) << at;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 'd') {
      EXPECT_TRUE(at[i] >= '0' && at[i] <= '9') << at;
    } else {
      EXPECT_EQ(at[i], shape[i]) << at;
    }
  }
  EXPECT_EQ(reader.header().headroom_version, HEADROOM_VERSION);
}

TEST(TraceRoundTrip, StepsEventsTagsAndPhasePeaks) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const std::vector<std::string> tags = {"embed.weight", "block.0.attn.out", "loss.chunk.3.logits",
                                         "块.ünïcode"};
  std::vector<MemoryEvent> events;
  for (uint64_t seq = 0; seq < 100; ++seq)
    events.push_back(make_event(seq, seq / 10));
  // The extremes of every field survive the packed file types.
  MemoryEvent extreme = make_event(100, -1);
  extreme.bytes = std::numeric_limits<uint64_t>::max();
  extreme.address = std::numeric_limits<uint64_t>::max() - 1;
  extreme.t_ns = std::numeric_limits<int64_t>::min();
  extreme.tag_id = 3;
  extreme.layer = std::numeric_limits<int32_t>::min();
  extreme.action = MemoryAction::kOom;
  extreme.category = Category::kWorkspace;
  extreme.phase = Phase::kReduce;
  events.push_back(extreme);

  std::vector<StepRecord> steps;
  std::vector<PhasePeakRecord> peaks;
  {
    TraceWriter writer(path, sample_header(), true);
    for (const MemoryEvent& e : events)
      writer.on_memory_event(e);
    for (int64_t s = 0; s < 5; ++s) {
      steps.push_back(make_step(s));
      std::vector<PhasePeakRecord> step_peaks;
      for (Phase p : kAllPhases)
        step_peaks.push_back({s, p, 1000 * static_cast<uint64_t>(s + 1) + static_cast<int>(p),
                              2000 * static_cast<uint64_t>(s + 1) + static_cast<int>(p)});
      peaks.insert(peaks.end(), step_peaks.begin(), step_peaks.end());
      writer.append_step(steps.back(), step_peaks);
    }
    EXPECT_EQ(writer.events_buffered(), events.size());
    writer.flush(tags);
    EXPECT_EQ(writer.events_buffered(), 0u);
    EXPECT_EQ(writer.events_written(), events.size());
    EXPECT_EQ(writer.steps_written(), 5u);
  }

  TraceReader reader = TraceReader::open(path);
  EXPECT_TRUE(reader.events_recorded());
  EXPECT_EQ(reader.tags(), tags);
  EXPECT_EQ(reader.steps(), steps);
  EXPECT_EQ(reader.phase_peaks(), peaks);
  std::vector<MemoryEvent> read = reader.events();
  ASSERT_EQ(read.size(), events.size());
  for (size_t i = 0; i < read.size(); ++i)
    testing::expect_event_eq(read[i], events[i], i);
}

TEST(TraceRoundTrip, TagsAppendedAcrossFlushesKeepTheirIds) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  std::vector<std::string> table = {"param.embed", "grad.embed"};
  {
    TraceWriter writer(path, sample_header(), true);
    writer.on_memory_event(make_event(0, 0));
    writer.append_step(make_step(0), {});
    writer.flush(table);

    // The allocator interned more tags; the whole table is passed again.
    table.push_back("activation.block.0");
    table.push_back("logits");
    writer.on_memory_event(make_event(1, 1));
    writer.append_step(make_step(1), {});
    writer.flush(table);

    // A flush with no new tags and nothing buffered changes nothing.
    writer.flush(table);

    // Between flushes the file already holds the first two flushes.
    TraceReader live = TraceReader::open(path);
    EXPECT_EQ(live.tags(), table);
    EXPECT_EQ(live.num_steps(), 2u);

    // A shorter table than before is a caller bug, not silently accepted.
    EXPECT_THROW(writer.flush({"param.embed"}), InternalError);
  }
  TraceReader reader = TraceReader::open(path);
  ASSERT_EQ(reader.tags(), table);
  EXPECT_EQ(reader.tags()[2], "activation.block.0");
  EXPECT_EQ(reader.num_events(), 2u);
  EXPECT_EQ(reader.num_steps(), 2u);
}

TEST(TraceRoundTrip, BufferedRecordsReachTheFileOnlyAtFlush) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  TraceWriter writer(path, sample_header(), true);
  writer.on_memory_event(make_event(0, 0));
  writer.append_step(make_step(0), {{0, Phase::kForward, 1, 2}});
  {
    // Opened while the writer is alive: consistent, and still empty.
    TraceReader reader = TraceReader::open(path);
    EXPECT_EQ(reader.num_steps(), 0u);
    EXPECT_EQ(reader.num_events(), 0u);
    EXPECT_TRUE(reader.phase_peaks().empty());
  }
  writer.flush({"a"});
  {
    TraceReader reader = TraceReader::open(path);
    EXPECT_EQ(reader.num_steps(), 1u);
    EXPECT_EQ(reader.num_events(), 1u);
    EXPECT_EQ(reader.phase_peaks().size(), 1u);
  }
}

TEST(TraceRoundTrip, ManyEventsAcrossChunksAndBatches) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  constexpr uint64_t kEvents = 50'000;  // about three 16 Ki-row chunks
  {
    TraceWriter writer(path, sample_header(), true);
    for (uint64_t seq = 0; seq < kEvents; ++seq) {
      writer.on_memory_event(make_event(seq, static_cast<int64_t>(seq / 7000)));
      if (seq % 7000 == 6999) writer.flush({"a", "b", "c"});  // partial chunks at each flush
    }
  }  // the tail is written by close()
  TraceReader reader = TraceReader::open(path);
  ASSERT_EQ(reader.num_events(), kEvents);
  uint64_t next = 0;
  size_t batches = 0;
  reader.for_each_event_batch(
      [&](const std::vector<MemoryEvent>& batch) {
        ++batches;
        for (const MemoryEvent& e : batch) {
          if (e.seq != next || e.bytes != 512 * (next + 1)) {
            ADD_FAILURE() << "event " << next << " came back as seq " << e.seq;
            return;
          }
          ++next;
        }
      },
      12'000);
  EXPECT_EQ(next, kEvents);
  EXPECT_EQ(batches, 5u);  // ceil(50000 / 12000)
}

TEST(TraceRoundTrip, EventsOffRecordsNoEvents) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  {
    TraceWriter writer(path, sample_header(), false);
    EXPECT_FALSE(writer.records_memory_events());
    writer.on_memory_event(make_event(0, 0));
    EXPECT_EQ(writer.events_buffered(), 0u);
    writer.append_step(make_step(0), {});
    writer.flush({"a"});
  }
  TraceReader reader = TraceReader::open(path);
  EXPECT_FALSE(reader.events_recorded());
  EXPECT_EQ(reader.num_events(), 0u);
  EXPECT_EQ(reader.num_steps(), 1u);
}

TEST(TraceRoundTrip, CloseWritesWhatIsBufferedAndIsIdempotent) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  TraceWriter writer(path, sample_header(), true);
  writer.append_step(make_step(0), {});
  writer.on_memory_event(make_event(0, 0));
  writer.close();
  EXPECT_FALSE(writer.is_open());
  writer.close();
  writer.on_memory_event(make_event(1, 0));  // ignored after close, never a crash
  EXPECT_THROW(writer.flush({}), InternalError);
  TraceReader reader = TraceReader::open(path);
  EXPECT_EQ(reader.num_steps(), 1u);
  EXPECT_EQ(reader.num_events(), 1u);
}

Postmortem sample_postmortem() {
  Postmortem pm;
  pm.requested_bytes = 1017118720;
  pm.rounded_bytes = 1017118720;
  pm.segment_bytes = 1017118720;
  pm.tag = "loss.chunk.7.logits";
  pm.category = Category::kLogits;
  pm.phase = Phase::kLoss;
  pm.layer = -1;
  pm.step = 12;
  pm.description = "fp32 [1024, 248320]";
  pm.allocated = 83006016512;
  pm.reserved = 83886080000;
  pm.capacity = 85162209280;
  pm.source = "meta";
  pm.capacity_limited = true;
  for (int i = 0; i < kNumCategories; ++i)
    pm.live_by_category[i] = 1000 * (i + 1);
  pm.largest_live = {
      {4'000'000'000, "optim.exp_avg.block.3", Category::kOptim, Phase::kInit, -1, -1},
      {970'000'000, "loss.chunk.3.logits", Category::kLogits, Phase::kLoss, -1, 12},
      {5'000'000, "block.27.attn.scores", Category::kAttention, Phase::kForward, 27, 12},
  };
  return pm;
}

TEST(TraceRoundTrip, OomPostmortem) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const Postmortem pm = sample_postmortem();
  TraceWriter writer(path, sample_header(), true);
  writer.on_memory_event(make_event(0, 12));
  writer.flush({"a", "b", "c"});
  writer.on_memory_event(make_event(1, 12));
  writer.write_oom(pm);
  EXPECT_THROW(writer.write_oom(pm), InternalError);  // one OOM per process

  // write_oom flushed: the file is complete before close, as after a crash.
  TraceReader reader = TraceReader::open(path);
  ASSERT_TRUE(reader.has_oom());
  EXPECT_EQ(reader.num_events(), 2u);
  Postmortem read = reader.oom();
  EXPECT_EQ(read.requested_bytes, pm.requested_bytes);
  EXPECT_EQ(read.rounded_bytes, pm.rounded_bytes);
  EXPECT_EQ(read.segment_bytes, pm.segment_bytes);
  EXPECT_EQ(read.tag, pm.tag);
  EXPECT_EQ(read.category, Category::kLogits);
  EXPECT_EQ(read.phase, Phase::kLoss);
  EXPECT_EQ(read.layer, -1);
  EXPECT_EQ(read.step, 12);
  EXPECT_EQ(read.description, pm.description);
  EXPECT_EQ(read.allocated, pm.allocated);
  EXPECT_EQ(read.reserved, pm.reserved);
  EXPECT_EQ(read.capacity, pm.capacity);
  EXPECT_EQ(read.source, "meta");
  EXPECT_TRUE(read.capacity_limited);
  EXPECT_EQ(read.live_by_category, pm.live_by_category);
  ASSERT_EQ(read.largest_live.size(), pm.largest_live.size());
  for (size_t i = 0; i < pm.largest_live.size(); ++i) {
    SCOPED_TRACE("top block " + std::to_string(i));
    EXPECT_EQ(read.largest_live[i].bytes, pm.largest_live[i].bytes);
    EXPECT_EQ(read.largest_live[i].tag, pm.largest_live[i].tag);
    EXPECT_EQ(read.largest_live[i].category, pm.largest_live[i].category);
    EXPECT_EQ(read.largest_live[i].phase, pm.largest_live[i].phase);
    EXPECT_EQ(read.largest_live[i].layer, pm.largest_live[i].layer);
    EXPECT_EQ(read.largest_live[i].step, pm.largest_live[i].step);
  }
}

TEST(TraceRoundTrip, OomWithNoLiveBlocksAndSourceLimit) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  Postmortem pm;
  pm.tag = "";
  pm.source = "cuda";
  pm.capacity_limited = false;
  {
    TraceWriter writer(path, sample_header(), true);
    writer.write_oom(pm);
  }
  Postmortem read = TraceReader::open(path).oom();
  EXPECT_TRUE(read.largest_live.empty());
  EXPECT_FALSE(read.capacity_limited);
  EXPECT_EQ(read.source, "cuda");
  EXPECT_EQ(read.capacity, 0u);
}

TEST(TraceRoundTrip, TheDriversFiguresOfACudaOomRoundTrip) {
  TempDir dir;
  Postmortem pm = sample_postmortem();
  pm.source = "cuda";
  pm.capacity_limited = false;
  pm.device_free = 1u << 30;
  pm.device_total = 80ull << 30;
  const std::string path = dir.file("t.h5");
  {
    TraceWriter writer(path, sample_header(), true);
    writer.write_oom(pm);
  }
  Postmortem read = TraceReader::open(path).oom();
  EXPECT_EQ(read.device_free, 1u << 30);
  EXPECT_EQ(read.device_total, 80ull << 30);
  // A trace without them (every cpu or meta OOM) reads as none.
  const std::string plain = dir.file("plain.h5");
  {
    TraceWriter writer(plain, sample_header(), true);
    writer.write_oom(sample_postmortem());
  }
  EXPECT_EQ(TraceReader::open(plain).oom().device_total, 0u);
}

TEST(TraceRoundTrip, NoOomThrowsWithPath) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  { TraceWriter writer(path, sample_header(), true); }
  TraceReader reader = TraceReader::open(path);
  try {
    reader.oom();
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom
