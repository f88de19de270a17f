#include "run_experiment.h"

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "advice/advice.h"
#include "advice/oom_follow_up.h"
#include "advice/why.h"
#include "comm/mpi_comm.h"
#ifdef HEADROOM_HAVE_NCCL
#include "comm/nccl_comm.h"
#endif
#include "config/config.h"
#include "embedded_quickstart.h"
#include "report/summary.h"
#include "stop_signals.h"
#include "trace/oom_advice.h"
#include "trace/reader.h"
#include "train/merge_adapters.h"
#include "train/plan_ranks.h"
#include "train/run.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {

namespace {

ExperimentConfig load(const RunOptions& options) {
  if (options.config_path.empty())
    return load_config_string(kQuickstartToml, kQuickstartName, options.overrides);
  return load_config_file(options.config_path, options.overrides);
}

// The communicator of an MPI job: NCCL over device memory for a cuda run
// (one GPU per rank, the local rank's), MPI over host memory otherwise.
std::unique_ptr<Communicator> make_job_comm(RunSection::Backend backend) {
  if (backend != RunSection::Backend::kCuda) return make_mpi_comm();
#ifdef HEADROOM_HAVE_NCCL
  return make_nccl_comm_for_local_rank();
#else
  // Run refuses a distributed cuda run on MpiComm, naming both.
  return make_mpi_comm();
#endif
}

std::string eta(double seconds) {
  char buf[32];
  int s = static_cast<int>(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

// "4,194,304".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The plan's answer to "will it fit?", with the peak of each phase over
// every step (the step rows in the trace hold them per step).
std::string plan_verdict(const RunResult& result) {
  const MemoryStats& s = result.memory;
  std::string out = "\nplan: peak allocated " + format_bytes_exact(s.peak_allocated) +
                    ", peak reserved " + format_bytes_exact(s.peak_reserved) + "\n";
  out += "  peak allocated by phase:";
  for (Phase phase : kAllPhases) {
    const uint64_t bytes = result.phase_peaks[static_cast<int>(phase)];
    if (bytes) out += " " + std::string(name_of(phase)) + " " + format_bytes(bytes) + ",";
  }
  out.back() = '\n';
  const uint64_t capacity = result.capacity;
  std::string against = "memory.device_capacity";
  if (result.device) {
    const DeviceBudget& d = *result.device;
    against = "what memory.device = \"" + std::string(d.preset->name) + "\" leaves";
    out += "  memory.device " + std::string(d.preset->name) + ": " + format_bytes(d.usable_bytes) +
           " usable; outside the allocator (estimates until measured on the device):\n";
    for (const BudgetLine& line : d.lines)
      out += "    " + line.name + " " + format_bytes(line.bytes) + "\n";
    out += "  the allocator gets " + format_bytes_exact(capacity) + "\n";
  }
  if (result.peak_shape) {
    // Padded batches: the shape behind the peak is what to change to lower it.
    const RunResult::PeakShape& shape = *result.peak_shape;
    out += "  peak set at step " + std::to_string(shape.step) + " by a micro-batch of " +
           std::to_string(shape.rows) + " x " + std::to_string(shape.width) + " tokens";
    if (shape.bucket >= 0)
      out += ", bucket " + std::to_string(shape.bucket) +
             " (<= " + std::to_string(result.buckets[static_cast<size_t>(shape.bucket)]) +
             " tokens) of " + std::to_string(result.buckets.size());
    out += "\n";
    const int64_t last = static_cast<int64_t>(result.buckets.size()) - 1;
    if (last >= 0 && result.largest_bucket_seen < last)
      out += "  note: no planned step reached the last bucket (<= " +
             std::to_string(result.buckets.back()) +
             " tokens), whose shape may peak higher: plan more run.steps\n";
  }
  if (capacity == 0)
    out +=
        "  no memory.device or memory.device_capacity set: nothing to check the peak "
        "against\n";
  else if (s.peak_reserved <= capacity)
    out += "  fits " + against + " " + format_bytes_exact(capacity) + " with " +
           format_bytes(capacity - s.peak_reserved) + " to spare\n";
  else
    out += "  does NOT fit " + against + " " + format_bytes_exact(capacity) + "\n";
  return out;
}

// Prints a run's progress to `out` (nullptr: nothing, for the ranks of a
// plan after the first) and an out-of-memory postmortem to stderr.
class PrintingObserver : public RunObserver {
 public:
  PrintingObserver(std::FILE* out, int rank, int world_size)
      : out_(out), rank_(rank), world_size_(world_size) {}

  void on_corpus_synthesis(const RunSettings& s) override {
    if (!out_) return;
    std::fprintf(out_,
                 "headroom %s: writing a synthetic Markov corpus to %s "
                 "(data.synthesize_if_missing)\n",
                 verb(s), s.data_path.c_str());
    std::fflush(out_);
  }

  void on_started(const RunSettings& s, double entropy) override {
    planning_ = s.backend == BackendKind::kMeta;
    padded_ = s.batch.mode == BatchOptions::Mode::kPadded;
    if (!out_) return;
    const std::string micro_batch =
        s.batch.mode == BatchOptions::Mode::kPacked
            ? std::to_string(s.batch.max_tokens_per_micro_batch) + " tokens"
        : s.batch.buckets.empty() && !s.batch.auto_buckets
            ? std::to_string(s.batch.micro_batch_size) + " padded rows"
            : "bucketed padded rows of <= " + std::to_string(s.batch.max_tokens_per_micro_batch) +
                  " tokens";
    std::fprintf(out_, "headroom %s: %s (%s, %.2fM parameters) on %s, %lld steps of %lld x %s%s\n",
                 verb(s), s.model.name.c_str(), std::string(name_of(s.transformer.dtype)).c_str(),
                 static_cast<double>(s.model.num_parameters()) / 1e6,
                 std::string(name_of(s.backend)).c_str(), static_cast<long long>(s.steps),
                 static_cast<long long>(s.batch.grad_accum), micro_batch.c_str(),
                 !planning_ ? ""
                 : s.target == TargetDevice::kCuda
                     ? " (meta: a cuda device's allocations, no math)"
                     : " (meta: this host cpu's allocations, no math)");
    if (entropy > 0 && !planning_)
      std::fprintf(out_,
                   "  data: %s, source entropy %.4f nats/token (the best loss a model can reach)\n",
                   s.data_path.c_str(), entropy);
    std::fflush(out_);
  }

  // PEFT's print_trainable_parameters(), so a LoRA run's numbers can be
  // checked against the ones users know.
  void on_model_built(int64_t trainable, int64_t all) override {
    if (!out_) return;
    std::fprintf(out_, "  trainable params: %s || all params: %s || trainable%%: %.4f\n",
                 grouped(trainable).c_str(), grouped(all).c_str(),
                 all ? 100.0 * static_cast<double>(trainable) / static_cast<double>(all) : 0.0);
    std::fflush(out_);  // before a postmortem on stderr
  }

  void on_auto_resume(const std::string& checkpoint,
                      const std::vector<std::string>& passed_over) override {
    if (!out_) return;
    for (const std::string& why : passed_over)
      std::fprintf(out_, "  checkpoint.resume = \"auto\": passed over %s\n", why.c_str());
    if (checkpoint.empty())
      std::fprintf(out_,
                   "  checkpoint.resume = \"auto\": no complete checkpoint of this config, "
                   "starting afresh\n");
    else
      std::fprintf(out_, "  checkpoint.resume = \"auto\": continuing from %s\n",
                   checkpoint.c_str());
    std::fflush(out_);
  }

  void on_resumed(const std::string& dir, const TrainState& state, const Cursor& cursor) override {
    if (!out_) return;
    std::fprintf(out_, "  resumed from %s: step %lld, data epoch %lld, micro-batch %lld\n",
                 dir.c_str(), static_cast<long long>(state.step),
                 static_cast<long long>(cursor.epoch), static_cast<long long>(cursor.position));
  }

  void on_step(const StepReport& r) override {
    if (!out_) return;
    const int64_t step = r.record.step;
    const double remaining = r.elapsed_seconds / static_cast<double>(step + 1 - r.first_step) *
                             static_cast<double>(r.steps - step - 1);
    if (!planning_) {
      char padding[32] = "";
      if (padded_)
        std::snprintf(padding, sizeof padding, "  pad %.1f%%", 100.0 * r.record.padding_fraction);
      std::fprintf(out_, "step %lld/%lld  loss %.4f  %.0f tok/s%s  peak %s  eta %s%s\n",
                   static_cast<long long>(step + 1), static_cast<long long>(r.steps), r.record.loss,
                   r.record.tokens_per_second, padding,
                   format_bytes(r.record.peak_allocated).c_str(), eta(remaining).c_str(),
                   r.record.skipped ? "  (skipped: not finite)" : "");
    } else if (r.elapsed_seconds - last_progress_ >= 5.0 && step + 1 < r.steps) {
      // A plan is quick step by step but may have many: say where it is.
      last_progress_ = r.elapsed_seconds;
      std::fprintf(out_, "plan: step %lld/%lld  peak %s  eta %s\n",
                   static_cast<long long>(step + 1), static_cast<long long>(r.steps),
                   format_bytes(r.peak_allocated_so_far).c_str(), eta(remaining).c_str());
    }
    std::fflush(out_);
  }

  void on_out_of_memory(const Postmortem& postmortem, const std::string& trace_path) override {
    if (world_size_ > 1)
      std::fprintf(stderr, "rank %d of %d ran out of memory:\n", rank_, world_size_);
    std::fprintf(stderr, "%s", format_postmortem(postmortem).c_str());
    std::fprintf(stderr, "postmortem written to %s (/oom)\n", trace_path.c_str());
  }

  // After an OOM the postmortem is the message, and after a non-finite stop
  // the error: the summary would repeat them. `headroom report` shows both.
  void on_finished(const RunResult& result) override {
    if (!out_ ||
        (result.outcome != RunOutcome::kFinished && result.outcome != RunOutcome::kStopped))
      return;
    if (result.outcome == RunOutcome::kStopped) {
      const std::string by = result.stop_signal
                                 ? std::string("on ") + stop_signal_name(result.stop_signal)
                             : world_size_ > 1 ? std::string("on another rank's signal")
                                               : std::string("on request");
      if (!result.committed) {
        // Before the first step: nothing to summarize, nothing written.
        std::fprintf(out_,
                     "\nstopped %s before the first step; the run folder is as it was (rerun "
                     "the same command to start again)\n",
                     by.c_str());
        std::fflush(out_);
        return;
      }
      std::fprintf(out_,
                   "\nstopped %s after step %lld%s%s; rerun with checkpoint.resume = \"auto\" "
                   "to continue\n",
                   by.c_str(), static_cast<long long>(result.next_step),
                   result.checkpoint.empty() ? "" : ", checkpoint ", result.checkpoint.c_str());
    }
    if (!result.checkpoint_seconds.empty()) {
      std::vector<double> seconds = result.checkpoint_seconds;
      std::sort(seconds.begin(), seconds.end());
      std::fprintf(out_, "\ncheckpoints: %zu saved, median %.3f s per save, last %s\n",
                   seconds.size(), seconds[seconds.size() / 2], result.checkpoint.c_str());
    }
    if (result.source_entropy_nats > 0 && !planning_)
      std::fprintf(out_, "\nfinal loss %.4f nats/token vs source entropy %.4f (gap %.4f)\n",
                   result.last_loss, result.source_entropy_nats,
                   result.last_loss - result.source_entropy_nats);
    std::fprintf(out_, "\n%s",
                 summarize_trace(TraceReader::open(result.trace_path.string())).c_str());
    if (planning_) std::fprintf(out_, "%s", plan_verdict(result).c_str());
    if (result.host_memory) {
      const MemoryStats& host = *result.host_memory;
      std::fprintf(out_,
                   "\nhost memory (zero.offload_optimizer): peak allocated %s, peak reserved %s; "
                   "optim %s, comm (transfer buffers) %s\n",
                   format_bytes(host.peak_allocated).c_str(),
                   format_bytes(host.peak_reserved).c_str(),
                   format_bytes(host.peak_by_category[static_cast<int>(Category::kOptim)]).c_str(),
                   format_bytes(host.peak_by_category[static_cast<int>(Category::kComm)]).c_str());
    }
    if (result.rss) {
      const RssCheck& rss = *result.rss;
      std::fprintf(
          out_,
          "\nrss check: peak resident %s above the baseline of %s, of which file-backed pages "
          "%s (library code); private %s; allocator peak reserved %s (ratio %.3f)\n",
          format_bytes_exact(rss.peak_above_baseline).c_str(), format_bytes(rss.baseline).c_str(),
          format_bytes_exact(rss.file_backed_growth).c_str(),
          format_bytes_exact(rss.private_peak_above_baseline).c_str(),
          format_bytes_exact(rss.allocator_peak_reserved).c_str(),
          rss.allocator_peak_reserved ? static_cast<double>(rss.private_peak_above_baseline) /
                                            static_cast<double>(rss.allocator_peak_reserved)
                                      : 0.0);
    }
  }

 private:
  static const char* verb(const RunSettings& s) {
    return s.mode == RunMode::kPlan ? "plan" : "train";
  }

  std::FILE* out_;
  int rank_;
  int world_size_;
  bool planning_ = false;
  bool padded_ = false;       // batch.mode = "padded": the progress line shows the padding
  double last_progress_ = 0;  // elapsed seconds at the last plan progress line
};

// The exit code of a run's outcome; a non-finite stop is an error like any
// other (main prints it, with the rank under MPI).
int exit_code_of(const RunResult& result) {
  switch (result.outcome) {
    case RunOutcome::kFinished:
      return static_cast<int>(ExitCode::kOk);
    case RunOutcome::kStopped:  // a signal (stop_signals.h): resumable
      return static_cast<int>(ExitCode::kStopped);
    case RunOutcome::kOutOfMemory:
      return static_cast<int>(ExitCode::kOutOfMemory);
    case RunOutcome::kNonFinite:
      throw NumericalError(result.message);
  }
  throw InternalError("unknown run outcome");
}

// After an out-of-memory: why it ran out (printed to stderr after the
// postmortem), then, unless `advise_too` is false, the same schedule
// re-planned with one change at a time and what fits, measured against the
// failed plan's figures `failed` (or, for a training, its re-plan); both
// added to the traces of the ranks that failed (advice/oom_follow_up.h).
// Advice that cannot be had (a disk too full for its plans) is said and
// skipped: the postmortem is already safe.
void explain_and_advise(const ExperimentConfig& config, int world_size,
                        const std::vector<RankOom>& ooms, const PlanFigures* failed,
                        bool advise_too) {
  std::vector<OomExplanation> whys;
  for (const RankOom& oom : ooms) {
    whys.push_back(explain_oom(config, oom.rank, world_size, oom.postmortem));
    if (&oom == &ooms.front()) std::fprintf(stderr, "%s", format_explanation(whys.back()).c_str());
  }
  std::string advice_text;
  if (advise_too) {
    const std::filesystem::path scratch = advice_scratch_folder();
    try {
      // A training's own figures are one rank's: its plan has them all.
      const PlanFigures baseline = failed ? *failed : plan_with(config, world_size, {}, scratch);
      const Advice advice = advise(config, world_size, baseline, scratch);
      std::fprintf(stderr, "%s", format_advice(advice).c_str());
      advice_text = advice_json(advice);
    } catch (const Error& e) {
      std::fprintf(stderr, "\nno advice: %s\n", e.what());
    }
  }
  try {
    store_oom_follow_up(ooms, whys, advice_text);
    if (!ooms.empty())
      std::fprintf(stderr, "  %s written to %s (/oom/advice)\n",
                   advise_too ? "why and what would fit" : "why", ooms.front().trace.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "  could not add the advice to the trace: %s\n", e.what());
  }
}

// One rank's run; rank 0 alone prints (to `out`, nullptr for none).
// A training stops resumably on SIGTERM, SIGUSR2 and SIGINT; a plan, which
// writes no checkpoint, keeps the default dispositions.
RunResult run_rank(const ExperimentConfig& config, const RunOptions& options, RunMode mode,
                   Communicator& comm, std::FILE* out) {
  const StopRequest* stop = mode == RunMode::kTrain ? &install_stop_signals() : nullptr;
  if (out && mode == RunMode::kTrain) {
    // A requeued Slurm job (sbatch --requeue) says how often it was; the
    // run itself goes by its checkpoints (checkpoint.resume = "auto").
    const char* restarts = std::getenv("SLURM_RESTART_COUNT");
    if (restarts && *restarts)
      std::fprintf(out, "headroom train: SLURM_RESTART_COUNT = %s\n", restarts);
  }
  Run run(config, mode, comm, RunControl{options.overwrite, stop});
  PrintingObserver observer(out, comm.rank(), comm.world_size());
  return run.execute(observer);
}

int run_single(const RunOptions& options, const ExperimentConfig& config, RunMode mode,
               Communicator& comm) {
  if (options.print_config) {
    if (comm.rank() == 0) std::fputs(to_toml(config).c_str(), stdout);
    return 0;
  }
  const RunResult result = run_rank(config, options, mode, comm, stdout);
  if (result.oom) {
    std::fflush(stdout);
    const PlanFigures planned = figures_of(config, comm.world_size(), {result}, comm.rank());
    explain_and_advise(config, comm.world_size(), {{comm.rank(), result.trace_path, *result.oom}},
                       mode == RunMode::kPlan ? &planned : nullptr, options.advise);
  }
  return exit_code_of(result);
}

// `plan --world-size N`: rank after rank in this process, each on a
// simulated communicator with its own batches. Rank 0 prints its plan as a
// single-rank plan does; then a table of every rank's peaks. The exit code
// is the worst rank's.
int plan_world(const RunOptions& options) {
  const ExperimentConfig config = load(options);
  if (options.print_config) {
    std::fputs(to_toml(config).c_str(), stdout);
    return 0;
  }
  std::vector<std::unique_ptr<PrintingObserver>> observers;
  for (int rank = 0; rank < options.world_size; ++rank)
    observers.push_back(
        std::make_unique<PrintingObserver>(rank == 0 ? stdout : nullptr, rank, options.world_size));
  const std::vector<RunResult> results =
      plan_ranks(config, options.world_size,
                 PlanRanksControl{.overwrite = options.overwrite,
                                  .stop_at_first_oom = false,
                                  .observer = [&](int rank) -> RunObserver& {
                                    return *observers[static_cast<size_t>(rank)];
                                  }});
  int worst = 0;
  for (const RunResult& r : results)
    worst = std::max(worst, exit_code_of(r));
  const uint64_t capacity = config.memory.device_capacity;
  std::printf("\nplan of %d data-parallel ranks (zero.stage %d), peaks per rank:\n",
              options.world_size, config.zero.stage);
  std::printf("  rank  peak allocated         peak reserved          longest sample  %s\n",
              capacity ? "fits" : "");
  for (int rank = 0; rank < options.world_size; ++rank) {
    const RunResult& r = results[static_cast<size_t>(rank)];
    std::string verdict = capacity == 0 ? "" : r.peak_step_reserved <= capacity ? "yes" : "NO";
    if (r.oom) {
      // The steps before the failing one are in the table; the postmortem
      // says where the failing request came.
      verdict = "OUT OF MEMORY at step " + std::to_string(r.oom->step) + " (" +
                std::string(name_of(r.oom->phase)) + ", " + format_bytes(r.oom->requested_bytes) +
                " for " + r.oom->tag + ")";
    }
    std::printf("  %4d  %-21s  %-21s  %14lld  %s\n", rank,
                format_bytes(r.peak_step_allocated).c_str(),
                format_bytes(r.peak_step_reserved).c_str(),
                static_cast<long long>(r.longest_sample), verdict.c_str());
  }
  std::vector<RankOom> ooms;
  for (size_t rank = 0; rank < results.size(); ++rank)
    if (results[rank].oom)
      ooms.push_back({static_cast<int>(rank), results[rank].trace_path, *results[rank].oom});
  if (!ooms.empty()) {
    std::fflush(stdout);
    const PlanFigures planned = figures_of(config, options.world_size, results);
    explain_and_advise(config, options.world_size, ooms, &planned, options.advise);
  }
  return worst;
}

}  // namespace

int export_merged(const RunOptions& options, const std::string& adapter, const std::string& out) {
  const MergedModel m = merge_adapters(load(options), adapter, out, options.overwrite);
  std::printf(
      "headroom export: merged %zu adapter group(s) (r = %lld, alpha = %g, %zu target(s)) into "
      "%s (%s, %s)\n  base: %s\n  wrote %s and config.json\n",
      m.adapter_groups, static_cast<long long>(m.rank), static_cast<double>(m.alpha), m.targets,
      m.model_name.c_str(), std::string(name_of(m.dtype)).c_str(), format_bytes(m.bytes).c_str(),
      m.base.c_str(), m.weights_path.c_str());
  return 0;
}

int run_experiment(const RunOptions& options, RunMode mode) {
  // Only `train` under an MPI launcher starts MPI: a plain `headroom plan`
  // or `train` stays a single process that needs no launcher.
  if (mode == RunMode::kPlan && options.world_size > 1) return plan_world(options);
  if (mode == RunMode::kTrain && srun_tasks_without_mpi() > 0)
    throw UsageError("srun started " + std::to_string(srun_tasks_without_mpi()) +
                     " tasks without an MPI plugin, so each would train alone: launch with "
                     "`srun --mpi=pmix ...` (Open MPI's PMIx client; Debian's Open MPI has no "
                     "PMI-2 support)");
  // The stop signals are caught from here on, so one that comes while MPI
  // starts or the config loads stops the run before its first step
  // (run_rank installs them again, after MPI_Init).
  if (mode == RunMode::kTrain) install_stop_signals();
  if (mode != RunMode::kTrain || !launched_by_mpi()) {
    std::unique_ptr<Communicator> single = make_single_rank_comm();
    return run_single(options, load(options), mode, *single);
  }
  // Every rank reads the config before MPI starts (a bad one ends each the
  // same way), since its backend says which communicator the job needs.
  const ExperimentConfig config = load(options);
  std::unique_ptr<Communicator> comm = make_job_comm(config.run.backend);
  if (!comm->is_distributed()) return run_single(options, config, mode, *comm);
  // Rank 0 speaks for the job; the others' stdout would repeat it N times.
  // Their stderr stays: an error names the rank it happened on.
  if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    throw InternalError("cannot silence stdout of rank " + std::to_string(comm->rank()));
  // A rank that fails must take the job down with it: the others would
  // otherwise wait in the next collective forever. Its message (and, after
  // an OOM, its postmortem and closed trace) come first.
  int exit_code = 0;
  try {
    exit_code = run_single(options, config, mode, *comm);
  } catch (const Error& e) {
    std::fprintf(stderr, "headroom train: rank %d of %d: %s\n", comm->rank(), comm->world_size(),
                 e.what());
    exit_code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headroom train: rank %d of %d: internal error: %s\n", comm->rank(),
                 comm->world_size(), e.what());
    exit_code = static_cast<int>(ExitCode::kInternal);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // A stop is agreed by every rank (Run's stop_agreed), so each returns 5
  // after the same checkpoint: no abort, a normal end with that code.
  const bool stopped = exit_code == static_cast<int>(ExitCode::kStopped);
  if (exit_code != 0 && !stopped) comm->abort(exit_code);
  comm->barrier();
  return exit_code;
}

}  // namespace headroom
