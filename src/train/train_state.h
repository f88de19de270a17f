// The training state beyond the weights, so a run resumes exactly where a
// checkpoint left it: AdamW's moments (and fp32 master weights for bf16),
// the step and update counts, and the data cursor. Beside model.safetensors
// and config.json in a checkpoint folder:
//   optimizer.safetensors  the tensors of AdamW::state, each in its dtype:
//                          "<group>.adam_m", "<group>.adam_v" (F32),
//                          "<group>.adam_m8", "<group>.adam_v8" (U8) and
//                          their ".absmax" (F32), "<group>.master"; with ZeRO
//                          sharding over N ranks, one file per rank instead:
//                          optimizer.rank<R>.safetensors, each rank's shards;
//                          under parallel.tensor = T > 1 those per
//                          tensor-parallel part, optimizer.tp<t>[.rank<R>]
//   trainer_state.json     {"step", "updates", "skipped", "data_cursor":
//                          {"epoch", "position"}, "optimizer_shards",
//                          "loss_scale", "loss_scale_clean_steps",
//                          "tensor_parallel" (when > 1),
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
#include "model/tensor_parallel.h"
#include "train/optimizer.h"
#include "train/trainer_state.h"

namespace headroom {

// Writes this rank's optimizer file into `dir` (which exists) through a
// temporary file and a rename: optimizer.safetensors when `shards` is 1,
// else optimizer.rank<rank>.safetensors.
//
// On failure (a full disk: UsageError "<file>: cannot write: No space left
// on device (disk full)") both functions remove the checkpoint folder `dir`
// (its weights, config, optimizer files and marker, then the folder if
// nothing else is in it) before rethrowing: a checkpoint is complete or
// absent.
// With parallel.tensor = `tensor` > 1 each tensor-parallel rank saves its
// own part's states, `rank` and `shards` counting the data-parallel ranks
// (optimizer_file).
void save_optimizer_state(AdamW& optimizer, const std::string& dir, int rank, int64_t shards,
                          int tensor_rank = 0, int64_t tensor = 1);

// The optimizer file of data-parallel rank `rank` of `shards` and
// tensor-parallel rank `tensor_rank` of `tensor`:
// <dir>/optimizer[.tp<T>][.rank<R>].safetensors (".tp<T>" only when tensor
// > 1, ".rank<R>" only when shards > 1).
std::string optimizer_file(const std::string& dir, int rank, int64_t shards, int tensor_rank = 0,
                           int64_t tensor = 1);

// Both, for a single rank.
void save_train_state(AdamW& optimizer, const TrainState& state, const std::string& dir);

// This rank's part of the tensor-parallel group and how the model's groups
// split (Transformer::split_group of each, in layout order): what reading a
// checkpoint of another parallel.tensor needs. The default, size 1 with no
// groups, reads only a checkpoint without tensor parallelism.
struct TensorParallelPart {
  int rank = 0;
  int size = 1;
  std::vector<SplitGroup> groups;
};

// Reads the state back, filling `optimizer`'s tensors with this rank's part
// under the current sharding (`world_size` ranks; `sharded_optimizer`: ZeRO
// >= 1 on several), from a checkpoint of either format written by any world
// size (load_optimizer_resharded). A tensor missing from the files, or one of
// another dtype (a different model or optimizer), is a UsageError naming
// the file and the tensor.
// Under parallel.tensor, `rank` and `world_size` count the data-parallel
// ranks and `part` names this rank's part; a checkpoint of another
// tensor-parallel size is resharded too (each old part's values of a state
// read whole, one group at a time, and this rank's part cut from them), but
// for a state that is not one value per parameter (8-bit moments' scales).
TrainState load_train_state(AdamW& optimizer, const std::vector<GroupLayout>& layouts,
                            const std::string& dir, int rank = 0, int world_size = 1,
                            bool sharded_optimizer = false, const TensorParallelPart& part = {});

}  // namespace headroom
