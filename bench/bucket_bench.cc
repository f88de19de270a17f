// Padding and training throughput of packed, plain padded and length-bucketed
// padded batches (batch.buckets), on two length mixes: seed 001's
// (histogram:6000-8000:3,22000-26000:1, the 7k + 24k mix of its postmortem,
// scaled by 1/32 so the cpu trains it in seconds) and a lognormal one. Each
// row is a real `train` of a small Qwen3 (width 128, 2 blocks, fp32, cpu) on
// a synthetic Markov corpus of that mix, through the same Run as `headroom train`;
// figures come from the trace's /steps after the first step (which builds
// the oneDNN primitives).
//
//   ./build/bench/bucket_bench [steps (default 5)] [work folder (default a temp one)]
//
// "target tok/s" counts only tokens with a target (what training learns
// from); "processed tok/s" counts padding too. Compare rows of one run: the
// machine is noisy.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "trace/reader.h"
#include "train/run.h"

using namespace headroom;

namespace {

struct Mix {
  const char* name;
  const char* lengths;  // data.synthetic_lengths
};

struct Mode {
  const char* name;
  std::vector<std::string> overrides;
};

struct Figures {
  double padding = 0;             // padding tokens / processed tokens
  double target_rate = 0;         // tokens with a target per second
  double processed_rate = 0;      // tokens including padding per second
  double micro_batch_tokens = 0;  // mean, padding included
  uint64_t peak = 0;              // peak allocated over the steps
};

Figures train(const std::filesystem::path& work, const Mix& mix, const Mode& mode, int steps) {
  std::vector<std::string> overrides = {
      "run.name=\"" + std::string(mix.name) + "-" + mode.name + "\"",
      "run.out_dir=\"" + (work / "results").string() + "\"",
      "run.steps=" + std::to_string(steps),
      "schedule.warmup_steps=1",
      "model.preset=\"\"",
      "model.hf_config=\"" + (work / "config.json").string() + "\"",
      "data.path=\"" + (work / (std::string(mix.name) + ".h5")).string() + "\"",
      "data.synthesize_if_missing=true",
      "data.synthetic_documents=200",
      "data.synthetic_lengths=\"" + std::string(mix.lengths) + "\"",
      "trace.memory_events=false",
  };
  overrides.insert(overrides.end(), mode.overrides.begin(), mode.overrides.end());
  const ExperimentConfig config = load_config_string("", "<bucket_bench>", overrides);
  std::unique_ptr<Communicator> comm = make_single_rank_comm();
  Run run(config, RunMode::kTrain, *comm, RunControl{true, nullptr});
  RunObserver quiet;
  const RunResult result = run.execute(quiet);
  const std::vector<StepRecord> rows = TraceReader::open(result.trace_path.string()).steps();
  double targets = 0, processed = 0, padding = 0, seconds = 0, micro_batches = 0;
  Figures f;
  for (size_t i = 0; i < rows.size(); ++i) {
    f.peak = std::max(f.peak, rows[i].peak_allocated);
    if (i == 0 && rows.size() > 1) continue;
    targets += static_cast<double>(rows[i].tokens);
    processed += static_cast<double>(rows[i].padded_tokens);
    padding += rows[i].padding_fraction * static_cast<double>(rows[i].padded_tokens);
    seconds += rows[i].step_seconds;
    micro_batches += static_cast<double>(rows[i].micro_batches);
  }
  f.padding = processed > 0 ? padding / processed : 0;
  f.target_rate = seconds > 0 ? targets / seconds : 0;
  f.processed_rate = seconds > 0 ? processed / seconds : 0;
  f.micro_batch_tokens = micro_batches > 0 ? processed / micro_batches : 0;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::filesystem::path work;
  bool temporary = argc <= 2;
  if (temporary) {
    char pattern[] = "/tmp/bucket_bench.XXXXXX";
    if (!mkdtemp(pattern)) {
      std::perror("mkdtemp");
      return 1;
    }
    work = pattern;
  } else {
    work = argv[2];
    std::filesystem::create_directories(work);
  }

  // A Qwen3 of width 128 and 2 blocks (0.4M parameters): small enough that
  // the whole table takes about a minute on 2 cores.
  std::ofstream(work / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"],
    "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 2048, "tie_word_embeddings": true})";

  const std::vector<Mix> mixes = {
      {"seed001", "histogram:188-250:3,688-812:1"},
      {"lognormal", "lognormal:128,0.9,8-1024"},
  };
  // Budgets alike: 1024 tokens per micro-batch, two micro-batches a step
  // (plain padded: 4 rows, about the budget at the mixes' means).
  const std::vector<Mode> modes = {
      {"packed",
       {"batch.mode=\"packed\"", "batch.max_tokens_per_micro_batch=1024", "batch.grad_accum=2"}},
      {"padded", {"batch.mode=\"padded\"", "batch.micro_batch_size=4", "batch.grad_accum=2"}},
      {"bucketed",
       {"batch.mode=\"padded\"", "batch.buckets=\"auto\"", "batch.max_tokens_per_micro_batch=1024",
        "batch.grad_accum=2"}},
      {"bucketed-longest",
       {"batch.mode=\"padded\"", "batch.buckets=\"auto\"", "batch.pad_to=\"longest\"",
        "batch.max_tokens_per_micro_batch=1024", "batch.grad_accum=2"}},
  };
  std::printf(
      "Qwen3 width 128 x 2 blocks (fp32, cpu), %d steps of 2 micro-batches, 200 documents "
      "per corpus; figures over the steps after the first\n\n",
      steps);
  std::printf(
      "| lengths | batches | padding | target tok/s | processed tok/s | micro-batch "
      "tokens | peak allocated |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Mix& mix : mixes)
    for (const Mode& mode : modes) {
      const Figures f = train(work, mix, mode, steps);
      std::printf("| %s | %s | %.1f%% | %.0f | %.0f | %.0f | %.1f MiB |\n", mix.name, mode.name,
                  100.0 * f.padding, f.target_rate, f.processed_rate, f.micro_batch_tokens,
                  static_cast<double>(f.peak) / (1 << 20));
      std::fflush(stdout);
    }
  if (temporary) std::filesystem::remove_all(work);
  return 0;
}
