// The `headroom` binary end to end: exit codes, messages, the run folder,
// the trace it leaves, and plan = run on the quickstart model.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_harness.h"
#include "config/config.h"
#include "test_util/small_run.h"
#include "trace/reader.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

// The quickstart, shrunk so each run takes a fraction of a second (also
// under ASan): a 50-document corpus and 256-token bins.
const std::string kSmall = testing::small_run_overrides(50);

using testing::Result;
using testing::slurp;

class Cli : public testing::ScratchFolder {
 protected:
  // Runs `headroom <args>` in the scratch folder.
  // `small` appends kSmall to train and plan (later --set wins, so a test
  // that needs other sizes passes small = false).
  Result run(const std::string& args, bool small = true) {
    const bool sized = args.rfind("train", 0) == 0 || args.rfind("plan", 0) == 0;
    return run_headroom(small && sized ? args + kSmall : args);
  }
};

TEST_F(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").code, 2);
  Result r = run("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos) << r.err;
  r = run("train --no-such-option");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no-such-option"), std::string::npos) << r.err;
  EXPECT_EQ(run("data synth").code, 2);
  r = run("plan --set checkpoint.format=\"sharded\" --set lora.enabled=true");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.err.find("checkpoint.format = \"sharded\" with lora.enabled = true: not supported yet"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(run("report").code, 2);
}

TEST_F(Cli, HelpAndVersionExitZero) {
  EXPECT_EQ(run("--help").code, 0);
  Result r = run("train --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--set"), std::string::npos);
  EXPECT_EQ(run("plan --help").code, 0);
  EXPECT_EQ(run("report --help").code, 0);
  EXPECT_EQ(run("--version").code, 0);
}

TEST_F(Cli, ConfigErrorNamesFileLineColumnAndWritesNothing) {
  write("x.toml", "[run]\nsteps = 2\n[attention]\nblock_sise = 64\n");
  Result r = run("train x.toml");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("x.toml:4:1: attention.block_sise: unknown key (did you mean "
                       "\"attention.block_size\"?)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "results"));

  r = run("train --set run.steps=ten");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set run.steps=ten: run.steps: expected an integer"), std::string::npos)
      << r.err;
  EXPECT_EQ(run("train missing.toml").code, 2);
}

TEST_F(Cli, PrintConfigShowsTheResolvedConfigAndRunsNothing) {
  Result r = run("plan --set run.steps=7 --print-config");
  ASSERT_EQ(r.code, 0) << r.err;
  ExperimentConfig config = load_config_string(r.out, "<stdout>");
  EXPECT_EQ(config.run.steps, 7);
  EXPECT_EQ(config.run.name, "quickstart");
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

TEST_F(Cli, AResumedRunContinuesExactlyWhereTheCheckpointLeftIt) {
  for (const char* dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const std::string common = std::string(" --set model.dtype=") + dtype +
                               " --set run.steps=4 --set checkpoint.save_every=2"
                               " --set batch.grad_accum=2 --set run.name=" +
                               dtype;
    Result straight = run("train" + common);
    ASSERT_EQ(straight.code, 0) << straight.err;
    const fs::path run_dir = dir_ / "results" / dtype;
    const fs::path step2 = run_dir / "checkpoints" / "step-2";
    for (const char* file :
         {"model.safetensors", "config.json", "optimizer.safetensors", "trainer_state.json"})
      EXPECT_TRUE(fs::exists(step2 / file)) << file;
    const std::string first_trace = slurp(run_dir / "trace.rank0.h5");

    Result resumed = run("train" + common + " --set checkpoint.resume_from=" + step2.string());
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
    EXPECT_EQ(slurp(run_dir / "trace.rank0.h5"), first_trace) << "the first trace is kept";
    EXPECT_TRUE(fs::exists(run_dir / "config.toml"));
    EXPECT_TRUE(fs::exists(run_dir / "config.from-step-2.toml"));
    const std::vector<StepRecord> a =
        TraceReader::open((run_dir / "trace.rank0.h5").string()).steps();
    const std::vector<StepRecord> b =
        TraceReader::open((run_dir / "trace.rank0.from-step-2.h5").string()).steps();
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      // Same weights, moments, counts and data: the same numbers, bit for bit.
      EXPECT_EQ(b[i].step, a[i + 2].step);
      EXPECT_EQ(b[i].loss, a[i + 2].loss) << "step " << b[i].step;
      EXPECT_EQ(b[i].grad_norm, a[i + 2].grad_norm) << "step " << b[i].step;
      EXPECT_EQ(b[i].lr, a[i + 2].lr) << "step " << b[i].step;
      EXPECT_EQ(b[i].tokens, a[i + 2].tokens) << "step " << b[i].step;
    }
  }
}

TEST_F(Cli, ResumingFromAWrongFolderIsRefusedBeforeAnythingIsWritten) {
  fs::create_directories(dir_ / "empty");
  Result r = run("train --set run.steps=4 --set checkpoint.resume_from=empty");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("empty/trainer_state.json: cannot open"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "results" / "quickstart")) << "nothing written";

  ASSERT_EQ(run("train --set run.steps=2 --set checkpoint.save_every=2").code, 0);
  r =
      run("train --set run.steps=2 --set run.name=again --set "
          "checkpoint.resume_from=results/quickstart/checkpoints/step-2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nothing left to train"), std::string::npos) << r.err;

  std::ofstream(dir_ / "results/quickstart/checkpoints/step-2/trainer_state.json")
      << R"({"format_version": 1, "step": 2, "updates": 2, "skipped": 0})";
  r =
      run("train --set run.steps=4 --set run.name=again --set "
          "checkpoint.resume_from=results/quickstart/checkpoints/step-2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("trainer_state.json: missing key \"data_cursor.epoch\""), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "results" / "again"));
}

TEST_F(Cli, TrainWritesConfigAndATraceThatReportReads) {
  Result r = run("train --set run.steps=3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("source entropy"), std::string::npos) << r.out;
  const fs::path run_dir = dir_ / "results" / "quickstart";
  EXPECT_EQ(load_config_file((run_dir / "config.toml").string()).run.steps, 3);
  TraceReader trace = TraceReader::open((run_dir / "trace.rank0.h5").string());
  EXPECT_EQ(trace.num_steps(), 3u);
  EXPECT_EQ(trace.header().backend, "cpu");
  EXPECT_GT(trace.num_events(), 0u);
  EXPECT_FALSE(trace.has_oom());
  EXPECT_EQ(load_config_string(trace.header().config_toml, "<trace>").run.steps, 3);
  for (const StepRecord& s : trace.steps())
    EXPECT_GT(s.peak_allocated, 0u);

  Result report = run("report results/quickstart");
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(report.out.find("peak allocated"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("logits"), std::string::npos) << report.out;
}

TEST_F(Cli, AnEarlierTraceIsNeverReplacedWithoutOverwrite) {
  ASSERT_EQ(run("train --set run.steps=2").code, 0);
  const fs::path trace = dir_ / "results" / "quickstart" / "trace.rank0.h5";
  const std::string before = slurp(trace);
  Result r = run("train --set run.steps=3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(trace), before) << "the earlier trace is byte for byte intact";
  ASSERT_EQ(run("train --set run.steps=3 --overwrite").code, 0);
  EXPECT_EQ(TraceReader::open(trace.string()).num_steps(), 3u);
}

TEST_F(Cli, OutOfMemoryExitsThreeWithThePostmortemInTheTrace) {
  // The model's weights, gradients and Adam states (~48 MiB) fit in 64 MiB;
  // the first step's activations do not.
  Result r = run("train --set run.steps=3 --set memory.device_capacity=64MiB");
  ASSERT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("OutOfMemory: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("largest live blocks"), std::string::npos) << r.err;
  TraceReader trace = TraceReader::open((dir_ / "results/quickstart/trace.rank0.h5").string());
  ASSERT_TRUE(trace.has_oom());
  Postmortem pm = trace.oom();
  EXPECT_EQ(pm.capacity, 64u << 20);
  EXPECT_TRUE(pm.capacity_limited);
  EXPECT_NE(pm.phase, Phase::kInit);
  EXPECT_FALSE(pm.largest_live.empty());
  // The oom event is followed only by the frees of unwinding the step.
  std::vector<MemoryEvent> events = trace.events();
  size_t oom_at = events.size();
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].action == MemoryAction::kOom) oom_at = i;
  ASSERT_LT(oom_at, events.size());
  EXPECT_EQ(events[oom_at].bytes, pm.rounded_bytes);
  for (size_t i = oom_at + 1; i < events.size(); ++i)
    EXPECT_TRUE(events[i].action == MemoryAction::kFree ||
                events[i].action == MemoryAction::kSegmentFree);
}

TEST_F(Cli, PlanMakesExactlyTheRunsAllocations) {
  for (const char* dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    std::string set = std::string(" --overwrite --set run.steps=2 --set model.dtype=") + dtype;
    ASSERT_EQ(run("train" + set).code, 0);
    ASSERT_EQ(run("plan" + set).code, 0);
    TraceReader real = TraceReader::open((dir_ / "results/quickstart/trace.rank0.h5").string());
    TraceReader plan = TraceReader::open((dir_ / "results/quickstart/plan.rank0.h5").string());
    EXPECT_EQ(plan.header().backend, "meta");
    std::vector<MemoryEvent> a = real.events(), b = plan.events();
    std::vector<std::string> ta = real.tags(), tb = plan.tags();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].action, b[i].action) << "event " << i;
      ASSERT_EQ(a[i].bytes, b[i].bytes) << "event " << i;
      ASSERT_EQ(ta[a[i].tag_id], tb[b[i].tag_id]) << "event " << i;
      ASSERT_EQ(a[i].category, b[i].category) << "event " << i;
      ASSERT_EQ(a[i].phase, b[i].phase) << "event " << i;
      ASSERT_EQ(a[i].layer, b[i].layer) << "event " << i;
      ASSERT_EQ(a[i].step, b[i].step) << "event " << i;
    }
    std::vector<StepRecord> sa = real.steps(), sb = plan.steps();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].peak_allocated, sb[i].peak_allocated);
      EXPECT_EQ(sa[i].peak_reserved, sb[i].peak_reserved);
    }
  }
}

// The resident set against the plan: resident_memory_test.cc.

TEST_F(Cli, ReportRejectsWhatIsNotATrace) {
  write("notes.h5", "hello");
  Result r = run("report notes.h5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("notes.h5"), std::string::npos) << r.err;
  EXPECT_EQ(run("report nowhere").code, 2);
}

}  // namespace
}  // namespace headroom
