// What a run tells whoever watches it (the CLI prints it; a test records
// it). The library prints nothing itself: every line a user sees of a run
// comes through one of these calls, in the order listed. Every rank calls
// its own observer; the CLI lets the lead speak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "memory/postmortem.h"
#include "trace/records.h"
#include "train/config_options.h"
#include "train/train_state.h"

namespace headroom {

struct RunResult;

// One step done, with its figures. In a plan (meta backend) the loss and
// gradient norm are NaN: nothing was computed.
struct StepReport {
  const StepRecord& record;
  int64_t first_step = 0;              // the run's first (later than 0 when resumed)
  int64_t steps = 0;                   // run.steps
  double elapsed_seconds = 0;          // since the first step began
  uint64_t peak_allocated_so_far = 0;  // the allocator's peak since the run began
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;

  // The lead found data.path missing and is about to write the synthetic
  // corpus there (data.synthesize_if_missing).
  virtual void on_corpus_synthesis(const RunSettings& /*settings*/) {}
  // The run is set up (folder locked, dataset open, trace created) and is
  // about to build the model. `source_entropy_nats` is the dataset's
  // (0 when it does not say).
  virtual void on_started(const RunSettings& /*settings*/, double /*source_entropy_nats*/) {}
  // The model is built: its parameters, and those that train (LoRA: the
  // adapters). Before the weights are loaded.
  virtual void on_model_built(int64_t /*trainable_parameters*/, int64_t /*all_parameters*/) {}
  // checkpoint.resume = "auto" decided, before the run started: continue
  // from `checkpoint` ("" = start afresh, none of this config is complete),
  // having passed over the newer step-N folders in `passed_over` ("<dir>:
  // <why>").
  virtual void on_auto_resume(const std::string& /*checkpoint*/,
                              const std::vector<std::string>& /*passed_over*/) {}
  // Resumed from the checkpoint `dir`: its state and the data cursor now.
  virtual void on_resumed(const std::string& /*dir*/, const TrainState& /*state*/,
                          const Cursor& /*cursor*/) {}
  // A step finished: its trace row was written and a checkpoint that was
  // due after it saved (every step, in order).
  virtual void on_step(const StepReport& /*report*/) {}
  // A complete checkpoint folder `dir` after `step` steps.
  virtual void on_checkpoint_saved(int64_t /*step*/, const std::string& /*dir*/) {}
  // Out of memory: the postmortem is in the trace (/oom) at `trace_path`.
  virtual void on_out_of_memory(const Postmortem& /*postmortem*/,
                                const std::string& /*trace_path*/) {}
  // The run is over, with any outcome, and its trace is closed.
  virtual void on_finished(const RunResult& /*result*/) {}
};

}  // namespace headroom
