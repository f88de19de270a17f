// trainer_state.json, the marker of a complete checkpoint folder
// (train_state.h describes the folder): the counts and cursor a resumed run
// continues from, written and read strictly, apart from the optimizer's
// files, so a reader of untrusted folders (tests/fuzz/train_state.cc) builds
// without the backend.
#pragma once

#include <cstdint>
#include <string>

namespace headroom {

struct TrainState {
  int64_t step = 0;     // optimizer steps completed: the run continues with step `step`
  int64_t updates = 0;  // AdamW updates applied (steps minus skipped ones)
  int64_t skipped = 0;  // steps skipped as non-finite
  int64_t data_epoch = 0;
  int64_t data_position = 0;
  int64_t optimizer_shards = 1;  // optimizer files: 1, or one per rank (ZeRO stage >= 1)
  bool sharded_format = false;   // checkpoint.format = "sharded" wrote it
  // The loss scale the next step uses and the updates since it last changed
  // (optimizer.loss_scale; trainer.h). 0: not recorded (a checkpoint from
  // before loss scaling, which had none): the run starts from its config's.
  double loss_scale = 0;
  int64_t scale_clean_steps = 0;
  // parallel.tensor of the run that wrote it: > 1, optimizer_shards files
  // per tensor-parallel rank (train_state.h's optimizer_file).
  int64_t tensor_parallel = 1;
  // Micro-batches a step trained on over all data-parallel ranks (their
  // number times each one's accumulation). 0: not recorded (an older
  // checkpoint). A resume that trains another number warns: its steps are
  // not the ones the checkpoint's run would have taken.
  int64_t micro_batches_per_step = 0;

  bool operator==(const TrainState&) const = default;
};

// Writes trainer_state.json (through a temporary file and a rename). Call it
// after every optimizer file is in place: a folder with trainer_state.json
// holds a complete state, and it is the only file whose presence a resume
// trusts (read_train_state); save_checkpoint removes an old one before it
// replaces the weights.
void save_trainer_state(const TrainState& state, const std::string& dir);

// Reads `dir`/trainer_state.json alone: what a run checks before it writes
// anything. A missing file or a missing / mistyped key is a UsageError naming
// the file and the key.
TrainState read_train_state(const std::string& dir);

// After a failed save: removes what a checkpoint folder holds (the marker
// first, the weights', optimizer's and shards' files) and the folder once
// empty, so a failed save leaves no step-N/ behind. Best effort.
void discard_checkpoint(const std::string& dir);

}  // namespace headroom
