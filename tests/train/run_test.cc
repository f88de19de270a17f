// Run (train/run.h) in this process, without the binary: plan = run event
// for event, the observer's view of a run, an out-of-memory outcome with its
// postmortem, the non-finite stop, a bit-exact resume and a stop request
// that leaves a checkpoint to resume from.
#include "train/run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "test_util/source_tree.h"
#include "test_util/temp_dir.h"
#include "trace/reader.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

// Everything the run told its observer, in order.
class Recorder : public RunObserver {
 public:
  void on_corpus_synthesis(const RunSettings&) override { events.push_back("corpus"); }
  void on_started(const RunSettings&, double) override { events.push_back("started"); }
  void on_model_built(int64_t trainable, int64_t all) override {
    events.push_back("model");
    trainable_parameters = trainable;
    all_parameters = all;
  }
  void on_resumed(const std::string&, const TrainState& state, const Cursor&) override {
    events.push_back("resumed " + std::to_string(state.step));
  }
  void on_step(const StepReport& report) override {
    events.push_back("step " + std::to_string(report.record.step));
    steps.push_back(report.record);
    if (stop && report.record.step == stop_after) stop->request();
  }
  void on_checkpoint_saved(int64_t step, const std::string& dir) override {
    events.push_back("checkpoint " + std::to_string(step));
    checkpoints.push_back(dir);
  }
  void on_out_of_memory(const Postmortem& postmortem, const std::string& trace) override {
    events.push_back("oom");
    oom = postmortem;
    oom_trace = trace;
  }
  void on_finished(const RunResult&) override { events.push_back("finished"); }

  std::vector<std::string> events;
  std::vector<StepRecord> steps;
  std::vector<std::string> checkpoints;
  int64_t trainable_parameters = 0, all_parameters = 0;
  Postmortem oom;
  std::string oom_trace;
  StopRequest* stop = nullptr;  // requested once step `stop_after` is done
  int64_t stop_after = -1;
};

// The quickstart shrunk to a model of a few thousand parameters (a Qwen3
// config.json of width 32) and a 50-document corpus, so a step takes
// milliseconds; its folder and corpus in a scratch folder. (Inside a
// fixture `Run` names gtest's Test::Run: the class is headroom::Run here.)
class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("config.json")) << R"({"architectures": ["Qwen3ForCausalLM"],
      "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
      "tie_word_embeddings": true})";
  }

  ExperimentConfig config(std::vector<std::string> overrides) const {
    std::vector<std::string> all = {
        "run.out_dir=\"" + dir_.file("results") + "\"",
        "data.path=\"" + dir_.file("data/markov.h5") + "\"",
        "model.preset=\"\"",
        "model.hf_config=\"" + dir_.file("config.json") + "\"",
        "data.synthetic_documents=50",
        "data.synthetic_lengths=\"uniform:16-96\"",
        "batch.max_tokens_per_micro_batch=128",
        "attention.block_size=16",
        "loss.chunk_size=64",
        "schedule.warmup_steps=1",
        "run.steps=4",
    };
    all.insert(all.end(), overrides.begin(), overrides.end());
    return load_config_file(testing::source_dir() + "/experiments/quickstart.toml", all);
  }

  RunResult execute(const std::vector<std::string>& overrides, RunMode mode, Recorder& recorder,
                    RunControl control = {}) {
    std::unique_ptr<Communicator> comm = make_single_rank_comm();
    headroom::Run run(config(overrides), mode, *comm, control);
    return run.execute(recorder);
  }

  fs::path run_dir(const std::string& name) const { return fs::path(dir_.file("results")) / name; }

  testing::TempDir dir_;
};

// The losses and norms of `steps`, which must be bit-identical to `want`'s.
void expect_same_steps(const std::vector<StepRecord>& got, const std::vector<StepRecord>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i].step);
    EXPECT_EQ(got[i].loss, want[i].loss) << "step " << got[i].step;
    EXPECT_EQ(got[i].grad_norm, want[i].grad_norm) << "step " << got[i].step;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "step " << got[i].step;
  }
}

// A plan and a cpu run of the same config make the same allocator events.
void expect_same_allocations(const RunResult& real, const RunResult& plan) {
  const TraceReader a = TraceReader::open(real.trace_path.string());
  const TraceReader b = TraceReader::open(plan.trace_path.string());
  EXPECT_EQ(b.header().backend, "meta");
  const std::vector<MemoryEvent> ea = a.events(), eb = b.events();
  const std::vector<std::string> ta = a.tags(), tb = b.tags();
  ASSERT_GT(ea.size(), 100u);
  ASSERT_EQ(ea.size(), eb.size());
  for (size_t i = 0; i < ea.size(); ++i) {
    ASSERT_EQ(ea[i].action, eb[i].action) << "event " << i;
    ASSERT_EQ(ea[i].bytes, eb[i].bytes) << "event " << i;
    ASSERT_EQ(ta[ea[i].tag_id], tb[eb[i].tag_id]) << "event " << i;
    ASSERT_EQ(ea[i].category, eb[i].category) << "event " << i;
    ASSERT_EQ(ea[i].phase, eb[i].phase) << "event " << i;
    ASSERT_EQ(ea[i].layer, eb[i].layer) << "event " << i;
    ASSERT_EQ(ea[i].step, eb[i].step) << "event " << i;
  }
  EXPECT_EQ(real.memory.peak_allocated, plan.memory.peak_allocated);
  EXPECT_EQ(real.memory.peak_reserved, plan.memory.peak_reserved);
  EXPECT_EQ(real.phase_peaks, plan.phase_peaks);
  EXPECT_EQ(real.peak_step_allocated, plan.peak_step_allocated);
  EXPECT_EQ(real.longest_sample, plan.longest_sample);
}

TEST_F(RunTest, PlanMakesExactlyTheAllocationsOfTheRun) {
  for (const char* dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const std::vector<std::string> set = {"run.steps=2", std::string("model.dtype=") + dtype};
    Recorder trained, planned;
    const RunResult real = execute(set, RunMode::kTrain, trained, {.overwrite = true});
    const RunResult plan = execute(set, RunMode::kPlan, planned, {.overwrite = true});
    ASSERT_EQ(real.outcome, RunOutcome::kFinished);
    ASSERT_EQ(plan.outcome, RunOutcome::kFinished);
    EXPECT_EQ(real.trace_path, run_dir("quickstart") / "trace.rank0.h5");
    EXPECT_EQ(plan.trace_path, run_dir("quickstart") / "plan.rank0.h5");
    EXPECT_TRUE(std::isfinite(real.last_loss));
    EXPECT_TRUE(std::isnan(plan.last_loss)) << "a plan computes no loss";
    expect_same_allocations(real, plan);
  }
}

TEST_F(RunTest, EveryOptimizerSettingPlansAsItRunsAndResumesBitForBit) {
  // Width 64: the 64 x 64 projections reach bitsandbytes' min_8bit_size.
  std::ofstream(dir_.file("wide.json")) << R"({"architectures": ["Qwen3ForCausalLM"],
    "vocab_size": 64, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "tie_word_embeddings": true})";
  const std::vector<std::vector<std::string>> settings = {
      {"model.dtype=\"bf16\"", "optimizer.master_dtype=\"none\""},
      {"model.dtype=\"bf16\"", "optimizer.master_dtype=\"bf16\"", "optimizer.kind=\"adamw_8bit\""},
      {"optimizer.kind=\"adamw_8bit\"", "zero.stage=1", "zero.offload_optimizer=true"},
      // fp16 with GradScaler's dynamic scale: the scale and its clean-step
      // count come back from the checkpoint.
      {"model.dtype=\"fp16\"", "optimizer.loss_scale=\"dynamic\""},
      // QLoRA: the NF4 base is quantized again from the same init on resume.
      {"model.quantization=\"nf4\"", "model.double_quant=true", "model.dtype=\"bf16\"",
       "lora.enabled=true", "lora.targets=[\"q_proj\", \"o_proj\", \"down_proj\"]"},
  };
  for (std::vector<std::string> set : settings) {
    set.push_back("model.hf_config=\"" + dir_.file("wide.json") + "\"");
    SCOPED_TRACE(set[0] + " " + set[1]);
    Recorder trained, planned;
    std::vector<std::string> saving = set;
    saving.push_back("checkpoint.save_every=2");
    const RunResult real = execute(saving, RunMode::kTrain, trained, {.overwrite = true});
    const RunResult plan = execute(saving, RunMode::kPlan, planned, {.overwrite = true});
    ASSERT_EQ(real.outcome, RunOutcome::kFinished);
    ASSERT_EQ(plan.outcome, RunOutcome::kFinished);
    expect_same_allocations(real, plan);

    const std::string step2 = (run_dir("quickstart") / "checkpoints" / "step-2").string();
    std::vector<std::string> resuming = set;
    resuming.push_back("run.name=resumed");
    resuming.push_back("checkpoint.resume_from=\"" + step2 + "\"");
    Recorder resumed;
    const RunResult result = execute(resuming, RunMode::kTrain, resumed, {.overwrite = true});
    ASSERT_EQ(result.outcome, RunOutcome::kFinished);
    expect_same_steps(resumed.steps, {trained.steps[2], trained.steps[3]});
  }
}

TEST_F(RunTest, TheObserverSeesEveryStepInOrder) {
  Recorder recorder;
  const RunResult result = execute({"checkpoint.save_every=2", "checkpoint.save_initial=true"},
                                   RunMode::kTrain, recorder);
  ASSERT_EQ(result.outcome, RunOutcome::kFinished);
  // A checkpoint of step N is saved after step N - 1's row and before the
  // observer hears of that step.
  const std::vector<std::string> expected = {
      "corpus", "started", "model",        "checkpoint 0", "step 0",  "checkpoint 2",
      "step 1", "step 2",  "checkpoint 4", "step 3",       "finished"};
  EXPECT_EQ(recorder.events, expected);
  ASSERT_EQ(recorder.steps.size(), 4u);
  const TraceReader trace = TraceReader::open(result.trace_path.string());
  const std::vector<StepRecord> rows = trace.steps();
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(recorder.steps[i], rows[i]) << "step " << i;
  EXPECT_GT(recorder.trainable_parameters, 0);
  EXPECT_EQ(recorder.trainable_parameters, recorder.all_parameters);
  EXPECT_EQ(result.first_step, 0);
  EXPECT_EQ(result.next_step, 4);
  EXPECT_EQ(result.checkpoint, recorder.checkpoints.back());
  EXPECT_TRUE(fs::exists(fs::path(result.checkpoint) / "trainer_state.json"));
  EXPECT_EQ(result.last_loss, rows.back().loss);
  EXPECT_GT(result.source_entropy_nats, 0.0);
}

TEST_F(RunTest, OutOfMemoryIsAnOutcomeWithItsPostmortem) {
  // Exact blocks, and a capacity halfway between the initialization's peak
  // and the first step's: the model fits, its first step does not.
  Recorder probe;
  const RunResult plan =
      execute({"memory.allocator=\"exact\"", "run.steps=1"}, RunMode::kPlan, probe);
  ASSERT_EQ(plan.outcome, RunOutcome::kFinished);
  const uint64_t init = plan.phase_peaks[static_cast<int>(Phase::kInit)];
  ASSERT_GT(plan.memory.peak_reserved, init);
  const std::string capacity =
      "memory.device_capacity=" + std::to_string((init + plan.memory.peak_reserved) / 2);

  Recorder recorder;
  const RunResult result =
      execute({"memory.allocator=\"exact\"", capacity}, RunMode::kTrain, recorder);
  ASSERT_EQ(result.outcome, RunOutcome::kOutOfMemory);
  ASSERT_TRUE(result.oom.has_value());
  EXPECT_TRUE(result.oom->capacity_limited);
  EXPECT_EQ(result.oom->capacity, (init + plan.memory.peak_reserved) / 2);
  EXPECT_NE(result.oom->phase, Phase::kInit);
  EXPECT_EQ(result.oom->step, 0);
  EXPECT_FALSE(result.oom->largest_live.empty());
  EXPECT_EQ(recorder.events.back(), "finished");
  EXPECT_EQ(recorder.events[recorder.events.size() - 2], "oom");
  EXPECT_EQ(recorder.oom.tag, result.oom->tag);
  EXPECT_EQ(recorder.oom_trace, result.trace_path.string());
  EXPECT_FALSE(result.rss.has_value()) << "no resident-memory verdict on a run that failed";

  const TraceReader trace = TraceReader::open(result.trace_path.string());
  ASSERT_TRUE(trace.has_oom());
  EXPECT_EQ(trace.oom().tag, result.oom->tag);
  EXPECT_EQ(trace.oom().requested_bytes, result.oom->requested_bytes);

  // The plan of the same capacity says the same.
  Recorder planned;
  const RunResult plan_oom = execute({"memory.allocator=\"exact\"", capacity}, RunMode::kPlan,
                                     planned, {.overwrite = true});
  ASSERT_EQ(plan_oom.outcome, RunOutcome::kOutOfMemory);
  EXPECT_EQ(plan_oom.oom->tag, result.oom->tag);
  EXPECT_EQ(plan_oom.oom->requested_bytes, result.oom->requested_bytes);
}

TEST_F(RunTest, NonFiniteStepsEndTheRunWithTheirOutcome) {
  Recorder recorder;
  const RunResult result = execute({"optimizer.lr=1e30", "optimizer.grad_clip=0.0",
                                    "optimizer.max_nonfinite_steps=2", "run.steps=10"},
                                   RunMode::kTrain, recorder);
  ASSERT_EQ(result.outcome, RunOutcome::kNonFinite);
  EXPECT_NE(result.message.find("optimizer.max_nonfinite_steps = 2"), std::string::npos)
      << result.message;
  // The first step updates (its gradients are finite) and ruins the weights.
  EXPECT_LT(result.next_step, 10);
  const TraceReader trace = TraceReader::open(result.trace_path.string());
  EXPECT_EQ(static_cast<int64_t>(trace.steps().size()), result.next_step)
      << "the steps that led to the stop are kept";
  EXPECT_TRUE(trace.steps().back().skipped);
}

TEST_F(RunTest, AResumedRunContinuesBitForBit) {
  Recorder straight;
  ASSERT_EQ(
      execute({"checkpoint.save_every=2", "batch.grad_accum=2"}, RunMode::kTrain, straight).outcome,
      RunOutcome::kFinished);
  const std::string step2 = (run_dir("quickstart") / "checkpoints" / "step-2").string();
  Recorder resumed;
  const RunResult result = execute({"checkpoint.save_every=2", "batch.grad_accum=2",
                                    "run.name=resumed", "checkpoint.resume_from=\"" + step2 + "\""},
                                   RunMode::kTrain, resumed);
  ASSERT_EQ(result.outcome, RunOutcome::kFinished);
  EXPECT_EQ(result.first_step, 2);
  EXPECT_EQ(result.trace_path, run_dir("resumed") / "trace.rank0.from-step-2.h5");
  const std::vector<std::string> expected = {"started",      "model",  "resumed 2", "step 2",
                                             "checkpoint 4", "step 3", "finished"};
  EXPECT_EQ(resumed.events, expected);
  expect_same_steps(resumed.steps, {straight.steps[2], straight.steps[3]});
}

TEST_F(RunTest, BucketedPaddedBatchesRecordTheirPaddingResumeAndNameThePeakBucket) {
  // Rows padded to their bucket, not rounded past it (the quickstart rounds
  // to a multiple of 64).
  const std::vector<std::string> bucketed = {
      "batch.mode=\"padded\"", "batch.buckets=[32, 64, 96]", "batch.pad_to_multiple_of=0",
      "batch.grad_accum=2",    "checkpoint.save_every=2",    "run.steps=6"};
  Recorder straight;
  const RunResult result = execute(bucketed, RunMode::kTrain, straight);
  ASSERT_EQ(result.outcome, RunOutcome::kFinished);
  EXPECT_EQ(result.buckets, (std::vector<int64_t>{32, 64, 96}));
  const std::vector<StepRecord> rows = TraceReader::open(result.trace_path.string()).steps();
  ASSERT_EQ(rows.size(), 6u);
  for (const StepRecord& row : rows) {
    EXPECT_GT(row.padding_fraction, 0.0) << "step " << row.step;
    EXPECT_LT(row.padding_fraction, 1.0) << "step " << row.step;
    EXPECT_LE(row.padded_tokens, 2 * 128) << "two micro-batches of <= 128 tokens after padding";
  }
  ASSERT_TRUE(result.peak_shape.has_value());
  const RunResult::PeakShape& peak = *result.peak_shape;
  ASSERT_GE(peak.bucket, 0);
  EXPECT_EQ(peak.width, result.buckets[static_cast<size_t>(peak.bucket)]) << "pad_to = \"bucket\"";
  EXPECT_EQ(peak.rows, std::max<int64_t>(1, 128 / peak.width));
  EXPECT_GE(result.largest_bucket_seen, peak.bucket);

  // The data cursor resumes bucketed batches exactly: the same losses.
  const std::string step2 = (run_dir("quickstart") / "checkpoints" / "step-2").string();
  std::vector<std::string> resume = bucketed;
  resume.push_back("run.name=resumed");
  resume.push_back("checkpoint.resume_from=\"" + step2 + "\"");
  Recorder resumed;
  ASSERT_EQ(execute(resume, RunMode::kTrain, resumed).outcome, RunOutcome::kFinished);
  expect_same_steps(resumed.steps, {straight.steps.begin() + 2, straight.steps.end()});

  Recorder packed;
  const RunResult plain =
      execute({"run.name=packed", "batch.pad_to_multiple_of=0"}, RunMode::kTrain, packed);
  EXPECT_FALSE(plain.peak_shape.has_value()) << "packed batches have no padded shape";
  for (const StepRecord& row : TraceReader::open(plain.trace_path.string()).steps())
    EXPECT_EQ(row.padding_fraction, 0.0);
}

// batch.pad_to_multiple_of: the padding is a segment nothing attends to and
// nothing learns from, so the losses are the unpadded run's (the same sums,
// on gemms of other shapes), the tokens counted are the same, and the plan
// still makes exactly the run's allocations.
TEST_F(RunTest, PaddedPackedBinsLoseWhatUnpaddedOnesLoseAndPlanAsTheyRun) {
  for (const char* dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const std::string dt = std::string("model.dtype=") + dtype;
    Recorder unpadded, padded, planned;
    ASSERT_EQ(
        execute({dt, "batch.pad_to_multiple_of=0"}, RunMode::kTrain, unpadded, {.overwrite = true})
            .outcome,
        RunOutcome::kFinished);
    const std::vector<std::string> set = {dt, "batch.pad_to_multiple_of=32", "run.name=padded"};
    const RunResult real = execute(set, RunMode::kTrain, padded, {.overwrite = true});
    const RunResult plan = execute(set, RunMode::kPlan, planned, {.overwrite = true});
    ASSERT_EQ(real.outcome, RunOutcome::kFinished);
    ASSERT_EQ(plan.outcome, RunOutcome::kFinished);
    ASSERT_EQ(padded.steps.size(), unpadded.steps.size());
    for (size_t i = 0; i < padded.steps.size(); ++i) {
      const StepRecord& got = padded.steps[i];
      const StepRecord& want = unpadded.steps[i];
      // Not bit for bit: gemms of another M (and, in dW, K) may sum in
      // another order, and in bf16 a last-bit difference of an fp32 sum can
      // round a stored element the other way (on an AVX2-only CPU's widened
      // gemms the bf16 loss moved by 1.2e-5 of itself within 4 steps).
      const double tolerance = std::string(dtype) == "bf16" ? 1e-4 : 1e-5;
      EXPECT_NEAR(got.loss, want.loss, tolerance * std::abs(want.loss)) << "step " << got.step;
      EXPECT_EQ(got.tokens, want.tokens) << "step " << got.step;
    }
    bool some_padding = false;
    for (const StepRecord& row : TraceReader::open(real.trace_path.string()).steps()) {
      EXPECT_EQ(row.padded_tokens % 32, 0) << "step " << row.step << ": the budget, 128, is a "
                                           << "multiple of 32, so every bin is one";
      some_padding = some_padding || row.padding_fraction > 0.0;
    }
    EXPECT_TRUE(some_padding);
    expect_same_allocations(real, plan);
  }
}

// Padded rows rounded up to a multiple: more padding at the end of each row,
// which no real token attends to (causal) and which has no target.
TEST_F(RunTest, PaddedRowsRoundedUpLoseWhatRowsToTheLongestLose) {
  const std::vector<std::string> padded = {"batch.mode=\"padded\"", "batch.micro_batch_size=2"};
  std::vector<std::string> longest = padded, rounded = padded;
  longest.push_back("batch.pad_to_multiple_of=0");
  rounded.insert(rounded.end(), {"batch.pad_to_multiple_of=48", "run.name=rounded"});
  Recorder to_longest, to_multiple, planned;
  ASSERT_EQ(execute(longest, RunMode::kTrain, to_longest).outcome, RunOutcome::kFinished);
  const RunResult real = execute(rounded, RunMode::kTrain, to_multiple);
  const RunResult plan = execute(rounded, RunMode::kPlan, planned, {.overwrite = true});
  ASSERT_EQ(real.outcome, RunOutcome::kFinished);
  ASSERT_EQ(to_multiple.steps.size(), to_longest.steps.size());
  for (size_t i = 0; i < to_multiple.steps.size(); ++i) {
    const StepRecord& got = to_multiple.steps[i];
    const StepRecord& want = to_longest.steps[i];
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss)) << "step " << got.step;
    EXPECT_EQ(got.tokens, want.tokens) << "step " << got.step;
  }
  for (const StepRecord& row : TraceReader::open(real.trace_path.string()).steps())
    EXPECT_EQ(row.padded_tokens % (2 * 48), 0)
        << "step " << row.step << ": two rows, each a multiple of 48";
  expect_same_allocations(real, plan);
}

TEST_F(RunTest, AStopRequestEndsTheRunWithACheckpointToResumeFrom) {
  Recorder straight;
  ASSERT_EQ(execute({"run.name=straight"}, RunMode::kTrain, straight).outcome,
            RunOutcome::kFinished);

  // Stopped after step 1 (two steps done), with no checkpoints configured.
  StopRequest stop;
  Recorder stopped;
  stopped.stop = &stop;
  stopped.stop_after = 1;
  const RunResult result = execute({}, RunMode::kTrain, stopped, {.stop = &stop});
  ASSERT_EQ(result.outcome, RunOutcome::kStopped);
  EXPECT_EQ(result.next_step, 2);
  const fs::path step2 = run_dir("quickstart") / "checkpoints" / "step-2";
  EXPECT_EQ(result.checkpoint, step2.string());
  EXPECT_TRUE(fs::exists(step2 / "trainer_state.json"));
  EXPECT_EQ(stopped.events.back(), "finished");
  EXPECT_EQ(stopped.events[stopped.events.size() - 2], "checkpoint 2");
  EXPECT_EQ(TraceReader::open(result.trace_path.string()).steps().size(), 2u);

  Recorder resumed;
  const RunResult rest =
      execute({"checkpoint.resume_from=\"" + step2.string() + "\""}, RunMode::kTrain, resumed);
  ASSERT_EQ(rest.outcome, RunOutcome::kFinished);
  expect_same_steps(stopped.steps, {straight.steps[0], straight.steps[1]});
  expect_same_steps(resumed.steps, {straight.steps[2], straight.steps[3]});

  // A plan stops alike, with nothing to save.
  StopRequest plan_stop;
  Recorder planned;
  planned.stop = &plan_stop;
  planned.stop_after = 0;
  const RunResult plan = execute({}, RunMode::kPlan, planned, {.stop = &plan_stop});
  EXPECT_EQ(plan.outcome, RunOutcome::kStopped);
  EXPECT_EQ(plan.next_step, 1);
  EXPECT_EQ(plan.checkpoint, "");
}

TEST_F(RunTest, WhatIsWrongIsRefusedBeforeAnythingIsWritten) {
  std::unique_ptr<Communicator> comm = make_single_rank_comm();
  // The checks that only read come with the Run.
  EXPECT_THROW(headroom::Run(config({"checkpoint.resume_from=\"" + dir_.file("nowhere") + "\""}),
                             RunMode::kTrain, *comm),
               UsageError);
  EXPECT_THROW(headroom::Run(config({"checkpoint.format=\"sharded\"", "lora.enabled=true"}),
                             RunMode::kPlan, *comm),
               UsageError);
  EXPECT_FALSE(fs::exists(run_dir("quickstart")));
  // A missing corpus is found once the folder is locked: it stays empty.
  Recorder recorder;
  headroom::Run missing(config({"data.synthesize_if_missing=false"}), RunMode::kTrain, *comm);
  EXPECT_THROW(missing.execute(recorder), UsageError);
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir("quickstart")))
    EXPECT_EQ(entry.path().filename(), ".train.lock") << "left behind";
  EXPECT_TRUE(recorder.events.empty());

  // A second execute of one Run is a bug of the caller.
  headroom::Run run(config({"run.steps=1"}), RunMode::kPlan, *comm);
  ASSERT_EQ(run.execute(recorder).outcome, RunOutcome::kFinished);
  EXPECT_THROW(run.execute(recorder), InternalError);
}

}  // namespace
}  // namespace headroom
