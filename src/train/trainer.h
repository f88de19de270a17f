// The optimizer step: micro-batches through the model with gradient
// accumulation, the global gradient norm (which doubles as the non-finite
// check), clipping, the learning rate, AdamW, and the step's trace row.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/transformer.h"
#include "parallel/zero.h"
#include "trace/records.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"

namespace headroom {

struct TrainerOptions {
  LrSchedule schedule;
  float grad_clip = 1.0f;  // global norm; 0 = no clipping
  // optimizer.loss_scale: a constant (1 = none), or dynamic as PyTorch's
  // GradScaler (init_scale 65536, growth_factor 2, backoff_factor 0.5,
  // growth_interval 2000).
  double loss_scale = 1.0;
  bool dynamic_loss_scale = false;
  int64_t scale_growth_interval = 2000;
};

class Trainer {
 public:
  // Data-parallel over `zero`'s communicator (`zero` must be the model's
  // residency, or have adopted its groups, and `optimizer` must be built on
  // its shards; both outlive the trainer): every rank runs its own
  // micro-batches, the loss is normalized by the counted tokens of all
  // ranks, and the gradients are summed over ranks before the norm, so
  // every rank applies the same update to the shards it owns.
  Trainer(Backend& backend, Transformer& model, AdamW& optimizer, const TrainerOptions& options,
          Zero& zero);
  // One rank; the model allocated its own groups.
  Trainer(Backend& backend, Transformer& model, AdamW& optimizer, const TrainerOptions& options);

  // One optimizer step over `micro_batches` (the step's gradient-accumulation
  // window). The loss is the mean over every counted token of the window, so
  // accumulation is exact whatever the micro-batch sizes. A non-finite loss
  // or gradient norm skips the update (gradients are zeroed, nothing else
  // changes) and marks the record. With loss scaling the loss gradient is
  // multiplied by the scale and the gradients divided by it again in the
  // norm, the clip and the update (no pass over them); a dynamic scale is
  // halved on a non-finite gradient norm with a finite loss (an overflow:
  // skipped, not a failure, overflowed() says so) and doubled after
  // scale_growth_interval updates in a row. On meta the loss and norm read
  // as 0. Peaks in the record are the allocator's since the step began.
  StepRecord step(int64_t step, const std::vector<Batch>& micro_batches);

  // Whether the last step was skipped for a dynamic loss scale's overflow.
  bool overflowed() const { return overflowed_; }
  // The allocator requests the last step made, counted from its
  // reset_peaks() on: exact per step, initialization not in it (the
  // exact allocator's segment calls per step, advice/step_cost.h).
  uint64_t last_step_allocations() const { return step_allocations_; }
  // The scale the next step uses, and the updates in a row since it last
  // changed: what a checkpoint keeps.
  double loss_scale() const { return scale_; }
  int64_t scale_clean_steps() const { return clean_steps_; }
  void restore_loss_scale(double scale, int64_t clean_steps) {
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

  int64_t skipped_steps() const { return skipped_; }
  // Updates applied so far (AdamW's bias-correction count).
  int64_t updates() const { return updates_; }
  // Continues the counts of a run resumed from a checkpoint.
  void restore_counts(int64_t updates, int64_t skipped) {
    updates_ = updates;
    skipped_ = skipped;
  }

 private:
  Backend& backend_;
  Transformer& model_;
  AdamW& optimizer_;
  TrainerOptions options_;
  std::unique_ptr<Communicator> single_;  // one rank: a world of one ...
  std::unique_ptr<Zero> own_zero_;        // ... and stage 0 over the model's own groups
  Zero& zero_;
  Communicator& comm_;
  int64_t updates_ = 0;  // applied updates: AdamW's bias-correction step
  int64_t skipped_ = 0;
  double scale_ = 1.0;       // the loss scale of the next step
  int64_t clean_steps_ = 0;  // updates since the scale last changed (dynamic)
  bool overflowed_ = false;
  uint64_t step_allocations_ = 0;  // of the last step
};

}  // namespace headroom
