// The report model (RunReport) and its renderings on a trace whose figures
// are known by construction: peaks, where the peak was, the blocks live
// there, the bucketed timeline, the JSON, the Perfetto export (parses, each
// counter's maximum is the category's peak, steps contain their phases,
// timestamps never go back on a track), the HTML's markers, `report A B`,
// and a trace of a newer schema refused by name.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/run_report.h"
#include "report/summary.h"
#include "test_util/source_tree.h"
#include "trace/oom_advice.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {
namespace {

using nlohmann::json;
using testing::TempDir;

struct Stream {
  std::vector<MemoryEvent> events;
  int64_t step = -1;
  Phase phase = Phase::kInit;
  int32_t layer = -1;
  void add(MemoryAction action, Category category, uint64_t bytes, uint64_t address,
           uint32_t tag_id) {
    MemoryEvent e{};
    e.seq = events.size();
    e.t_ns = 1000 + static_cast<int64_t>(events.size()) * 250;
    e.step = step;
    e.action = action;
    e.bytes = bytes;
    e.address = address;
    e.category = category;
    e.tag_id = tag_id;
    e.phase = phase;
    e.layer = layer;
    events.push_back(e);
  }
};

const std::vector<std::string> kTags = {"param.embed", "block.0.attn.q", "loss.chunk.0.logits",
                                        "optim.exp_avg", "block.1.mlp.up"};

// init: param 8 MiB. step 0: activation 3 + 2, free 3, logits 30 (the peak:
// 8 + 2 + 30 = 40 MiB at event 5), free logits, optim 4. step 1: 12000
// alloc/free pairs of 1 MiB activation, then a 6 MiB one (activation's own
// peak: the 2 MiB still live + 6 = 8 MiB). 2 + 6 + 24002 = 24010 events.
Stream known_stream() {
  using A = MemoryAction;
  Stream s;
  s.add(A::kSegmentAlloc, Category::kParam, 64 * kMiB, 0x1000000, 0);
  s.add(A::kAlloc, Category::kParam, 8 * kMiB, 0x1000, 0);
  s.step = 0;
  s.phase = Phase::kForward;
  s.layer = 0;
  s.add(A::kAlloc, Category::kActivation, 3 * kMiB, 0x2000, 1);
  s.add(A::kAlloc, Category::kActivation, 2 * kMiB, 0x3000, 1);
  s.phase = Phase::kBackward;
  s.add(A::kFree, Category::kActivation, 3 * kMiB, 0x2000, 1);
  s.phase = Phase::kLoss;
  s.layer = -1;
  s.add(A::kAlloc, Category::kLogits, 30 * kMiB, 0x4000, 2);  // event 5: the peak
  s.add(A::kFree, Category::kLogits, 30 * kMiB, 0x4000, 2);
  s.phase = Phase::kOptimizer;
  s.add(A::kAlloc, Category::kOptim, 4 * kMiB, 0x5000, 3);
  s.step = 1;
  s.phase = Phase::kForward;
  s.layer = 1;
  for (int i = 0; i < 12000; ++i) {
    s.add(A::kAlloc, Category::kActivation, kMiB, 0x6000, 4);
    s.add(A::kFree, Category::kActivation, kMiB, 0x6000, 4);
  }
  s.add(A::kAlloc, Category::kActivation, 6 * kMiB, 0x7000, 4);
  s.phase = Phase::kBackward;
  s.add(A::kFree, Category::kActivation, 6 * kMiB, 0x7000, 4);
  return s;
}

std::string write_trace(const std::string& path, const std::vector<MemoryEvent>& events, int steps,
                        const Postmortem* oom = nullptr,
                        const std::string& config = "[run]\nname = \"t\"\n") {
  TraceHeader header = testing::sample_header();
  header.config_toml = config;
  TraceWriter writer(path, header, true);
  for (const MemoryEvent& e : events)
    writer.on_memory_event(e);
  for (int s = 0; s < steps; ++s)
    writer.append_step(testing::make_step(s), {{s, Phase::kForward, (10 + s) * kMiB, 64 * kMiB},
                                               {s, Phase::kLoss, 40 * kMiB, 64 * kMiB}});
  writer.flush(kTags);
  if (oom != nullptr) writer.write_oom(*oom);
  writer.close();
  return path;
}

class RunReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stream_ = known_stream();
    path_ = write_trace(dir_.file("trace.rank0.h5"), stream_.events, 2);
    run_ = build_run_report(path_);
    ASSERT_EQ(run_.traces.size(), 1u);
  }
  const TraceReport& trace() const { return run_.traces[0]; }

  TempDir dir_;
  Stream stream_;
  std::string path_;
  RunReport run_;
};

TEST_F(RunReportTest, PeaksAndWhereThePeakWas) {
  const TraceReport& r = trace();
  const MemoryReplay direct = replay_memory_events(TraceReader::open(path_));
  EXPECT_EQ(r.replay.peak_allocated, direct.peak_allocated);
  EXPECT_EQ(r.replay.peak_by_category, direct.peak_by_category);
  EXPECT_EQ(r.replay.peak_allocated, 40 * kMiB);
  EXPECT_EQ(r.replay.peak_reserved, 64 * kMiB);
  EXPECT_EQ(r.replay.peak_by_category[static_cast<int>(Category::kActivation)], 8 * kMiB);
  EXPECT_EQ(r.peak_seq, 5u);
  EXPECT_EQ(r.peak_step, 0);
  EXPECT_EQ(r.num_events, stream_.events.size());
  EXPECT_EQ(r.num_tags, kTags.size());
  // The text summary is the model's rendering, unchanged.
  EXPECT_EQ(render_text(r), summarize_trace(TraceReader::open(path_)));
}

TEST_F(RunReportTest, BlocksLiveAtThePeak) {
  const TraceReport& r = trace();
  ASSERT_EQ(r.peak_blocks.size(), 3u);
  EXPECT_EQ(r.peak_blocks[0].tag, "loss.chunk.0.logits");
  EXPECT_EQ(r.peak_blocks[0].bytes, 30 * kMiB);
  EXPECT_EQ(r.peak_blocks[1].tag, "param.embed");
  EXPECT_EQ(r.peak_blocks[2].tag, "block.0.attn.q");
  EXPECT_EQ(r.peak_blocks[2].bytes, 2 * kMiB);  // the 3 MiB one was freed before the peak
  EXPECT_EQ(r.peak_blocks[2].layer, 0);
  uint64_t sum = 0;
  for (const PeakBlock& b : r.peak_blocks)
    sum += b.bytes;
  EXPECT_EQ(sum, r.replay.peak_allocated);
}

TEST_F(RunReportTest, TimelineEnvelopes) {
  const TraceReport& r = trace();
  ASSERT_FALSE(r.timeline.empty());
  std::array<uint64_t, kNumCategories> category_max{};
  uint64_t allocated_max = 0, reserved_max = 0, next_seq = 0;
  size_t step1_buckets = 0;
  for (const TimelineBucket& b : r.timeline) {
    EXPECT_EQ(b.seq_begin, next_seq);  // buckets tile the events
    next_seq = b.seq_end;
    uint64_t stacked = 0;
    for (int c = 0; c < kNumCategories; ++c) {
      stacked += b.at_max[c];
      category_max[c] = std::max(category_max[c], b.category_max[c]);
    }
    EXPECT_EQ(stacked, b.allocated_max) << "bucket at " << b.seq_begin;
    EXPECT_LE(b.allocated_min, b.allocated_max);
    allocated_max = std::max(allocated_max, b.allocated_max);
    reserved_max = std::max(reserved_max, b.reserved_max);
    for (uint64_t s = b.seq_begin; s < b.seq_end; ++s)
      EXPECT_EQ(stream_.events[s].step, b.step) << "a bucket crosses a step boundary";
    if (b.step == 0) {
      EXPECT_EQ(b.seq_end - b.seq_begin, 1u) << "the peak step is kept whole";
    }
    if (b.step == 1) {
      ++step1_buckets;
      EXPECT_LE(b.seq_end - b.seq_begin, 13u);  // ceil(24002 / 2000)
    }
  }
  EXPECT_EQ(next_seq, stream_.events.size());
  EXPECT_EQ(category_max, r.replay.peak_by_category);
  EXPECT_EQ(allocated_max, r.replay.peak_allocated);
  EXPECT_EQ(reserved_max, r.replay.peak_reserved);
  EXPECT_GE(step1_buckets, 1800u);
  EXPECT_LE(step1_buckets, 2100u);
}

TEST_F(RunReportTest, PhaseSpans) {
  const TraceReport& r = trace();
  // init; step 0: forward, backward, loss, optimizer; step 1: forward, backward.
  ASSERT_EQ(r.phases.size(), 7u);
  EXPECT_EQ(r.phases[0].step, -1);
  EXPECT_EQ(r.phases[3].phase, Phase::kLoss);
  EXPECT_EQ(r.phases[3].largest_tag, "loss.chunk.0.logits");
  EXPECT_EQ(r.phases[3].largest_alloc, 30 * kMiB);
  EXPECT_EQ(r.phases[5].allocs, 12001u);
  for (size_t i = 1; i < r.phases.size(); ++i) {
    EXPECT_EQ(r.phases[i].seq_begin, r.phases[i - 1].seq_end);
    EXPECT_LE(r.phases[i - 1].t_end_ns, r.phases[i].t_begin_ns);
  }
}

TEST_F(RunReportTest, Json) {
  const json j = json::parse(render_json(run_));
  const json& t = j["traces"][0];
  EXPECT_EQ(t["memory"]["peak_allocated"].get<uint64_t>(), 40 * kMiB);
  EXPECT_EQ(t["memory"]["peak_by_category"]["activation"].get<uint64_t>(), 8 * kMiB);
  EXPECT_EQ(t["memory"]["peak_step"].get<int64_t>(), 0);
  EXPECT_EQ(t["memory"]["peak_by_phase"]["loss"].get<uint64_t>(), 40 * kMiB);
  EXPECT_EQ(t["steps"]["step"].size(), 2u);
  EXPECT_EQ(t["timeline"]["seq_begin"].size(), trace().timeline.size());
  EXPECT_EQ(t["peak_blocks"][0]["tag"], "loss.chunk.0.logits");
  EXPECT_TRUE(t["oom"].is_null());
  EXPECT_EQ(t["header"]["run_name"], "qwen3-8b-lora-\u03b1");
}

// The Perfetto checks, shared with the OOM trace below.
void check_perfetto(const TraceReport& r, const json& doc) {
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<std::string, uint64_t> counter_max;
  std::map<std::string, double> last_ts;  // per track
  struct Slice {
    std::string name, cat;
    double ts, end;
  };
  std::vector<Slice> slices;
  int instants = 0;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    const double ts = e["ts"].get<double>();
    const std::string track = ph == "C" ? "C/" + e["name"].get<std::string>()
                                        : "T/" + std::to_string(e["tid"].get<int>());
    if (last_ts.count(track)) {
      EXPECT_LE(last_ts[track], ts) << "track " << track << " goes back";
    }
    last_ts[track] = ts;
    EXPECT_EQ(e["pid"].get<int>(), r.header.rank);
    if (ph == "C") {
      uint64_t& m = counter_max[e["name"]];
      m = std::max(m, e["args"]["bytes"].get<uint64_t>());
    } else if (ph == "X") {
      slices.push_back({e["name"], e.value("cat", ""), ts, ts + e["dur"].get<double>()});
    } else if (ph == "i") {
      ++instants;
      EXPECT_EQ(e["name"], "OOM: " + r.oom->tag);
      EXPECT_EQ(e["args"]["tag"], r.oom->tag);
    }
  }
  for (Category c : kAllCategories) {
    const uint64_t peak = r.replay.peak_by_category[static_cast<int>(c)];
    const std::string name(name_of(c));
    if (peak == 0) {
      EXPECT_EQ(counter_max.count(name), 0u) << name;
    } else {
      EXPECT_EQ(counter_max[name], peak) << name;
    }
  }
  EXPECT_EQ(counter_max["reserved"], r.replay.peak_reserved);
  EXPECT_EQ(counter_max["allocated"], r.replay.peak_allocated);
  EXPECT_EQ(instants, r.oom ? 1 : 0);
  // Every phase slice lies inside the step slice before it.
  const Slice* step = nullptr;
  size_t phases = 0, steps = 0;
  for (const Slice& s : slices) {
    if (s.cat == "step") {
      if (step != nullptr) {
        EXPECT_LE(step->end, s.ts) << "steps overlap";
      }
      step = &s;
      ++steps;
    } else {
      ASSERT_NE(step, nullptr) << "a phase before any step";
      EXPECT_EQ(s.cat, "phase");
      EXPECT_GE(s.ts, step->ts) << s.name << " starts before " << step->name;
      EXPECT_LE(s.end, step->end) << s.name << " ends after " << step->name;
      ++phases;
    }
  }
  EXPECT_EQ(phases, r.phases.size());
  EXPECT_GE(steps, 1u);
}

TEST_F(RunReportTest, Perfetto) {
  const json doc = json::parse(render_perfetto(run_));
  check_perfetto(trace(), doc);
  // init, step 0, step 1.
  int steps = 0;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e.value("cat", "") == "step") ++steps;
  EXPECT_EQ(steps, 3);
}

TEST_F(RunReportTest, Html) {
  const std::string html = render_html(run_);
  EXPECT_NE(html.find("data-peak-bytes=\"" + std::to_string(40 * kMiB) + "\""), std::string::npos);
  EXPECT_NE(html.find(format_bytes_exact(40 * kMiB)), std::string::npos);
  // One series per category that held bytes, in the overview chart.
  const size_t overview = html.find("id=\"timeline-r0\"");
  const size_t detail = html.find("id=\"detail-r0-");
  ASSERT_NE(overview, std::string::npos);
  ASSERT_NE(detail, std::string::npos);
  const std::string chart = html.substr(overview, detail - overview);
  for (Category c : kAllCategories) {
    const bool has = trace().replay.peak_by_category[static_cast<int>(c)] > 0;
    const std::string series = "class=\"series\" data-category=\"" + std::string(name_of(c)) + "\"";
    EXPECT_EQ(chart.find(series) != std::string::npos, has) << name_of(c);
  }
  EXPECT_EQ(html.find("http://"), std::string::npos);  // nothing fetched
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(html.find("block.0"), std::string::npos);  // the tag groups
  EXPECT_LT(html.size(), 1u << 20);
}

// A byte count at the top of uint64_t's range becomes 2^64 as a chart's
// double; its label is clamped back, not cast out of range (found by the
// trace fuzz target: regressions/trace/chart_bytes_past_uint64).
TEST(RunReport, AStepPeakOfTheLargestByteCountChartsAsIt) {
  TempDir dir;
  const std::string path = dir.file("trace.rank0.h5");
  {
    TraceWriter writer(path, testing::sample_header(), true);
    for (int s = 0; s < 2; ++s) {
      StepRecord step = testing::make_step(s);
      step.peak_allocated = step.peak_reserved = UINT64_MAX;
      writer.append_step(step, {});
    }
    writer.flush(kTags);
    writer.close();
  }
  const std::string html = render_html(build_run_report(path));
  const std::string most = format_bytes(UINT64_MAX);
  EXPECT_NE(html.find(most + " .. " + most), std::string::npos) << most;
}

TEST(RunReport, OomTrace) {
  TempDir dir;
  Stream s = known_stream();
  s.add(MemoryAction::kOom, Category::kLogits, 100 * kMiB, 0, 2);
  const Postmortem pm = testing::sample_oom();
  const std::string path = write_trace(dir.file("plan.rank0.h5"), s.events, 1, &pm);
  const RunReport run = build_run_report(dir.path());
  ASSERT_EQ(run.traces.size(), 1u);
  const TraceReport& r = run.traces[0];
  ASSERT_TRUE(r.oom.has_value());
  ASSERT_TRUE(r.oom_seq.has_value());
  EXPECT_EQ(*r.oom_seq, s.events.size() - 1);
  EXPECT_EQ(r.detail_steps(), (std::vector<int64_t>{0, 1}));
  check_perfetto(r, json::parse(render_perfetto(run)));
  const json j = json::parse(render_json(run));
  EXPECT_EQ(j["traces"][0]["oom"]["tag"], "loss.chunk.7.logits");
  EXPECT_EQ(j["traces"][0]["oom"]["top_blocks"][0]["tag"], "param.embed");
  EXPECT_EQ(j["traces"][0]["oom"]["fields"].size(), postmortem_fields(pm).size());
  EXPECT_EQ(j["traces"][0]["oom"]["fields"][0]["key"], "tag");
  const std::string html = render_html(run);
  EXPECT_NE(html.find("<section class=\"oom\">"), std::string::npos);
  for (const ReportField& f : postmortem_fields(pm))
    EXPECT_NE(html.find("data-key=\"" + f.key + "\""), std::string::npos) << f.key;
  EXPECT_NE(html.find("class=\"oom\" x1="), std::string::npos);  // the OOM line on the chart
}

TEST(RunReport, AnOomsAdviceReachesEveryRendering) {
  TempDir dir;
  Stream s = known_stream();
  s.add(MemoryAction::kOom, Category::kLogits, 100 * kMiB, 0, 2);
  const Postmortem pm = testing::sample_oom();
  const std::string path = write_trace(dir.file("plan.rank0.h5"), s.events, 1, &pm);
  write_oom_advice(path, R"({"why": ["step 1 began with 1 GiB live"],
    "fits": [{"set": ["loss.mode=recompute"], "peak_reserved": 1048576,
              "extra_step_time": 0.02, "effect": "same training"}],
    "not_fitting": [{"set": ["memory.allocator=exact"], "out_of_memory_at": "loss in loss"}]})");
  const RunReport run = build_run_report(path);
  const TraceReport& r = run.traces.at(0);
  ASSERT_EQ(r.oom_advice.size(), 4u);
  EXPECT_EQ(r.oom_advice[1].key, "cheapest_fit");
  EXPECT_EQ(r.oom_advice[1].value, "--set loss.mode=recompute");
  const std::string text = render_text(r);
  EXPECT_NE(text.find("cheapest that fits:\n    --set loss.mode=recompute"), std::string::npos)
      << text;
  EXPECT_NE(text.find("still out of memory:\n    --set memory.allocator=exact: at loss in loss"),
            std::string::npos)
      << text;
  EXPECT_NE(render_html(run).find("data-key=\"cheapest_fit\""), std::string::npos);
  const json j = json::parse(render_json(run));
  EXPECT_EQ(j["traces"][0]["oom"]["fields"].size(), postmortem_fields(pm).size() + 4);
  // A trace without advice reads as before.
  TempDir other;
  const std::string plain = write_trace(other.file("plan.rank0.h5"), s.events, 1, &pm);
  EXPECT_TRUE(build_run_report(plain).traces.at(0).oom_advice.empty());
}

TEST(RunReport, FolderRankOrderAndPlanChoice) {
  TempDir dir;
  Stream s = known_stream();
  for (const char* name : {"trace.rank10.h5", "trace.rank2.h5", "plan.rank0.h5"})
    write_trace(dir.file(name), s.events, 1);
  std::vector<std::string> all = traces_of(dir.path());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(std::filesystem::path(all[0]).filename(), "plan.rank0.h5");
  std::vector<std::string> runs = traces_of(dir.path(), TraceSelection::kRuns);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(std::filesystem::path(runs[0]).filename(), "trace.rank2.h5");
  EXPECT_EQ(std::filesystem::path(runs[1]).filename(), "trace.rank10.h5");
  EXPECT_EQ(traces_of(dir.path(), TraceSelection::kRunsElsePlans), runs);
  std::vector<std::string> plans = traces_of(dir.path(), TraceSelection::kPlans);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(std::filesystem::path(plans[0]).filename(), "plan.rank0.h5");
  EXPECT_THROW(traces_of(dir.file("nothing")), UsageError);
}

TEST(RunReport, Comparison) {
  TempDir dir;
  Stream s = known_stream();
  const std::string a = write_trace(dir.file("a.h5"), s.events, 2);
  const std::string same = write_trace(dir.file("same.h5"), s.events, 2);
  s.events[5].bytes = 31 * kMiB;  // the logits a MiB bigger (and its free)
  s.events[6].bytes = 31 * kMiB;
  const std::string b = write_trace(dir.file("b.h5"), s.events, 2, nullptr,
                                    "[run]\nname = \"t\"\n[loss]\nchunk_size = 0\n");
  const std::string equal = render_comparison(build_run_report(a), build_run_report(same));
  EXPECT_NE(equal.find("the event streams are the same (24010 events"), std::string::npos) << equal;
  EXPECT_NE(equal.find("config differences (A | B):\n  none"), std::string::npos) << equal;
  const std::string diff = render_comparison(build_run_report(a), build_run_report(b));
  EXPECT_NE(diff.find("first difference at event 5:"), std::string::npos) << diff;
  EXPECT_NE(diff.find("loss.chunk_size: (not set) | 0"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+1.0 MiB"), std::string::npos) << diff;  // the logits' peak delta
}

// data_tools/headroom_trace.py (h5py + pandas) on a trace written here:
// tests/report/data_tools_check.py asserts the stream's known figures.
TEST(RunReport, DataToolsPython) {
  const bool have =
      testing::run_command(std::string(testing::kPython) + " -c 'import h5py, pandas'").exit_code ==
      0;
  if (!have) {
    if (std::getenv("CI") != nullptr) FAIL() << testing::kPython << " lacks h5py or pandas";
    GTEST_SKIP() << testing::kPython << " lacks h5py or pandas (python3-h5py, python3-pandas)";
  }
  TempDir dir;
  const std::string path = write_trace(dir.file("trace.rank0.h5"), known_stream().events, 2);
  const testing::CommandResult r =
      testing::run_command(std::string(testing::kPython) + " '" + testing::source_dir() +
                           "/tests/report/data_tools_check.py' '" + testing::source_dir() +
                           "/data_tools' '" + path + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok"), std::string::npos) << r.output;
}

TEST(RunReport, RefusesANewerSchemaByName) {
  TempDir dir;
  const std::string path = write_trace(dir.file("trace.rank0.h5"), known_stream().events, 1);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t attr = H5Aopen(file, "schema_version", H5P_DEFAULT);
  ASSERT_GE(attr, 0);
  int32_t version = kTraceSchemaVersion + 1;
  ASSERT_GE(H5Awrite(attr, H5T_NATIVE_INT32, &version), 0);
  H5Aclose(attr);
  ASSERT_GE(H5Fclose(file), 0);
  try {
    build_run_report(dir.path());
    FAIL() << "a schema-2 trace was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": trace schema version 2 is newer than this "
                                                "headroom reads (1)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace headroom
