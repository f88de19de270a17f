// Run: one rank's run of an experiment, `train` or `plan` alike (promise 1:
// one code path; a plan only swaps the backend for meta). It owns
//  - the run folder (train/run_folder.h): locked, files staged and committed
//    once the run has a result, the earlier run's files replaced;
//  - the data: a missing synthetic corpus written (data.synthesize_if_missing),
//    the batches of this rank;
//  - the trace: every allocation and step, the postmortem of an OOM;
//  - the model, optimizer and trainer on the backend make_backend() gives;
//  - the step loop: checkpoints (checkpoint.save_every, save_initial),
//    resume (checkpoint.resume_from, or checkpoint.resume = "auto":
//    train/auto_resume.h), the non-finite stop
//    (optimizer.max_nonfinite_steps), the trace's disk check, and a stop
//    request honoured between steps;
//  - the resident-memory check against the allocator (cpu).
// It prints nothing: progress goes to a RunObserver.
//
// Several ranks (comm.world_size() > 1): rank 0 is the lead. It alone locks
// the folder, writes the config, the corpus and the checkpoints' weights;
// every rank writes its own trace (and its optimizer shard). Every rank must
// construct and execute its Run with the same config, in step.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "memory/allocator.h"
#include "memory/device_preset.h"
#include "memory/postmortem.h"
#include "train/config_options.h"
#include "train/run_observer.h"
#include "train/stop_request.h"
#include "train/train_state.h"

namespace headroom {

enum class RunOutcome {
  kFinished,     // every step of run.steps
  kStopped,      // a StopRequest: a checkpoint of the steps so far was saved (train);
                 // before the first step: nothing was written (RunResult::committed)
  kOutOfMemory,  // the postmortem is in the trace and in RunResult::oom (exit code 3)
  kNonFinite,    // optimizer.max_nonfinite_steps, or no finite step at all (exit code 4)
};

// The operating system's view of the run's memory (cpu runs): the peak
// resident set above the baseline taken just before the first model
// allocation, against the allocators' peak reserved.
// The kernel's view of a cpu run against the allocator's. Code pages the run
// first touches after the baseline (oneDNN's kernels, HDF5's write path) are
// resident too, but they are the libraries' files, not memory the run holds:
// file_backed_growth (RssFile at the end minus at the baseline; file pages
// are rarely dropped, so the end is the peak) separates them, and
// private_peak_above_baseline = peak_above_baseline - file_backed_growth is
// what is compared with the allocator.
struct RssCheck {
  uint64_t baseline = 0;
  uint64_t peak_above_baseline = 0;
  uint64_t file_backed_growth = 0;
  uint64_t private_peak_above_baseline = 0;
  uint64_t allocator_peak_reserved = 0;  // the device's plus the host's (zero.offload_optimizer)
};

struct RunResult {
  RunOutcome outcome = RunOutcome::kFinished;
  int64_t first_step = 0;  // 0, or the step a resumed run continued with
  int64_t next_step = 0;   // steps completed in all: a resume continues with this one
  std::filesystem::path trace_path;
  std::string checkpoint;  // the last checkpoint folder saved; "" when none was
  // Wall seconds of each checkpoint save, in order (on rank 0: from the
  // first write until the folder is complete on every rank).
  std::vector<double> checkpoint_seconds;
  std::optional<Postmortem> oom;   // kOutOfMemory
  std::string message;             // kNonFinite: why the run stopped, naming the key
  double last_loss = 0;            // of the last step; NaN in a plan
  double source_entropy_nats = 0;  // the dataset's; 0 when it does not say
  // The run's files are in place (its first step, checkpoint or postmortem
  // happened); false: the folder was left as it was.
  bool committed = false;
  int stop_signal = 0;  // kStopped: the signal this rank was asked by (0: none, another rank's)

  // The device allocator at the end, and its peak allocated per phase over
  // the initialization and every step.
  MemoryStats memory;
  std::array<uint64_t, kNumPhases> phase_peaks{};
  uint64_t capacity = 0;  // the allocator's: memory.device's remainder or memory.device_capacity
  std::optional<DeviceBudget> device;      // memory.device: the lines outside the allocator
  std::optional<MemoryStats> host_memory;  // zero.offload_optimizer's host allocator
  std::optional<RssCheck> rss;  // cpu runs that finished or stopped, where the kernel allows it
  // The highest of the steps' trace rows.
  uint64_t peak_step_allocated = 0;
  uint64_t peak_step_reserved = 0;
  int64_t longest_sample = 0;
  // Sums over the steps this run completed (next_step - first_step of
  // them), for the mean step a cost model prices: tokens processed
  // (padding included), each step's longest sample, and the allocator
  // requests each step made (exact: counted from the trainer's
  // reset_peaks, initialization not in them).
  int64_t padded_tokens_sum = 0;
  int64_t longest_sample_sum = 0;
  uint64_t step_allocations_sum = 0;
  // Padded batches: the shape that set peak_step_allocated, i.e. the
  // costliest micro-batch (rows x width) of the step with the highest peak,
  // and its bucket (-1 without batch.buckets).
  struct PeakShape {
    int64_t step = 0;
    int64_t rows = 0;
    int64_t width = 0;
    int64_t bucket = -1;
  };
  std::optional<PeakShape> peak_shape;
  std::vector<int64_t> buckets;      // batch.buckets as resolved ("auto" made concrete)
  int64_t largest_bucket_seen = -1;  // the highest bucket any step of this rank trained on
};

// What the command line adds to the config.
struct RunControl {
  bool overwrite = false;  // replace an earlier run of the same run.name (--overwrite)
  // Checked before the first step and after every step; nullptr: never stop
  // early. With several ranks, every rank passes one or none, and they agree
  // on the step to stop after (one host sum per step), so a request that
  // reached only some ranks stops them all.
  const StopRequest* stop = nullptr;
};

class Run {
 public:
  // Maps `config` (run_settings_of) and checks everything that only reads:
  // the values this build refuses, data.path, model.weights, the checkpoint
  // to resume from (checkpoint.resume = "auto": found first, by
  // find_auto_resume). A UsageError from here means nothing was written.
  // `comm` must outlive the Run.
  Run(const ExperimentConfig& config, RunMode mode, Communicator& comm, RunControl control = {});

  // Runs every step (or until a stop request), telling `observer`. Returns
  // the outcome: finished, stopped, out of memory (postmortem written) or
  // non-finite (the trace keeps every step so far). Other failures throw
  // (UsageError for what the user can fix: an existing run without
  // --overwrite, a full disk, a folder locked by another command): before
  // the first step, the run folder is left as it was. Call it once.
  RunResult execute(RunObserver& observer);

  const RunSettings& settings() const { return settings_; }

 private:
  ExperimentConfig config_;
  RunSettings settings_;
  Communicator& comm_;
  RunControl control_;
  bool resuming_ = false;
  TrainState resume_state_;  // resuming_: the checkpoint's
  // checkpoint.resume = "auto": the folder holds an earlier attempt of this
  // run (its files are replaced without --overwrite), and what was passed over.
  bool auto_own_folder_ = false;
  std::vector<std::string> auto_passed_over_;
  bool data_exists_ = false;
  bool executed_ = false;
};

}  // namespace headroom
