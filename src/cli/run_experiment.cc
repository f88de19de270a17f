#include "run_experiment.h"

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "advice/advice.h"
#include "advice/oom_follow_up.h"
#include "comm/mpi_comm.h"
#ifdef HEADROOM_HAVE_NCCL
#include "comm/nccl_comm.h"
#endif
#include "config/config.h"
#include "embedded_quickstart.h"
#include "run_printer.h"
#include "stop_signals.h"
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

// After an out-of-memory, its follow-up (advice/oom_follow_up.h) on stderr.
void explain_and_advise(const ExperimentConfig& config, int world_size,
                        const std::vector<RankOom>& ooms, const PlanFigures* failed,
                        bool advise_too) {
  follow_up_oom(config, world_size, ooms, failed, advise_too,
                [](const std::string& text) { std::fputs(text.c_str(), stderr); });
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
  if (config.parallel.tensor > 1)
    std::printf(
        "\nplan of %d ranks, %d tensor-parallel groups of %d (parallel.tensor; zero.stage %d "
        "over each group's data-parallel ranks), peaks per rank:\n",
        options.world_size, options.world_size / config.parallel.tensor, config.parallel.tensor,
        config.zero.stage);
  else
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
