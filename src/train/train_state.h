// The training state beyond the weights, so a run resumes exactly where a
// checkpoint left it: AdamW's moments (and fp32 master weights for bf16),
// the step and update counts, and the data cursor. Beside model.safetensors
// and config.json in a checkpoint folder:
//   optimizer.safetensors  the tensors of AdamW::state, each in its dtype:
//                          "<group>.adam_m", "<group>.adam_v" (F32),
//                          "<group>.adam_m8", "<group>.adam_v8" (U8) and
//                          their ".absmax" (F32), "<group>.master"; with ZeRO
//                          sharding over N ranks, one file per rank instead:
//                          optimizer.rank<R>.safetensors, each rank's shards
//   trainer_state.json     {"step", "updates", "skipped", "data_cursor":
//                          {"epoch", "position"}, "optimizer_shards",
//                          "loss_scale", "loss_scale_clean_steps",
//                          "format_version": 1}, and "format": "sharded"
//                          in a checkpoint.format = "sharded" folder
//                          (train/sharded_checkpoint.h: shard.rank<R>.
//                          safetensors and shard_index.json instead of
//                          model.safetensors and the optimizer files)
// The data cursor counts bins of the global stream (all ranks together,
// data/batcher.h), so it carries over to any world size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "train/optimizer.h"

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

  bool operator==(const TrainState&) const = default;
};

// Writes this rank's optimizer file into `dir` (which exists) through a
// temporary file and a rename: optimizer.safetensors when `shards` is 1,
// else optimizer.rank<rank>.safetensors.
//
// On failure (a full disk: UsageError "<file>: cannot write: No space left
// on device (disk full)") both functions remove the checkpoint folder `dir`
// (its weights, config, optimizer files and marker, then the folder if
// nothing else is in it) before rethrowing: a checkpoint is complete or
// absent.
void save_optimizer_state(AdamW& optimizer, const std::string& dir, int rank, int64_t shards);

// Writes trainer_state.json (through a temporary file and a rename). Call it
// after every optimizer file is in place: a folder with trainer_state.json
// holds a complete state, and it is the only file whose presence a resume
// trusts (read_train_state); save_checkpoint removes an old one before it
// replaces the weights.
void save_trainer_state(const TrainState& state, const std::string& dir);

// Both, for a single rank.
void save_train_state(AdamW& optimizer, const TrainState& state, const std::string& dir);

// Reads `dir`/trainer_state.json alone: what a run checks before it writes
// anything. A missing file or a missing / mistyped key is a UsageError naming
// the file and the key.
TrainState read_train_state(const std::string& dir);

// Reads the state back, filling `optimizer`'s tensors with this rank's part
// under the current sharding (`world_size` ranks; `sharded_optimizer`: ZeRO
// >= 1 on several), from a checkpoint of either format written by any world
// size (load_optimizer_resharded). A tensor missing from the files, or one of
// another dtype (a different model or optimizer), is a UsageError naming
// the file and the tensor.
TrainState load_train_state(AdamW& optimizer, const std::vector<GroupLayout>& layouts,
                            const std::string& dir, int rank = 0, int world_size = 1,
                            bool sharded_optimizer = false);

}  // namespace headroom
