// checkpoint.format = "sharded": every rank writes its own part of the
// weights and of the optimizer state, in parallel, and nothing is gathered
// onto one rank (a consolidated save under ZeRO-3 gathers every group onto
// the lead: seed 002's out-of-memory trap). A checkpoint folder step-N/:
//
//   shard_index.json           what a loader of another world size needs:
//     {"format": "headroom-sharded", "format_version": 1, "world_size": N,
//      "zero_stage": s, "dtype": "BF16",
//      "groups": [{"name": "block.0", "numel": n,
//                  "ranges": [[begin, end], ...],      one per rank, elements
//                  "tensors": [{"name": "<HF name>", "shape": [...],
//                               "offset": k}, ...]}, ...],
//      "state": [{"name": "block.0.adam_m", "group": "block.0",
//                 "dtype": "F32", "elementwise": true}, ...]}
//   shard.rank<R>.safetensors  rank R's part: per group "<group>.params"
//                              (1-D, the model's dtype) = elements
//                              ranges[R] of the flat group, and each of
//                              AdamW::state()'s tensors of the group:
//                              elementwise ones (one value per parameter:
//                              moments, master) over the same range, others
//                              (e.g. per-block scales) as rank R holds them.
//                              A rank whose range is empty has no tensor of
//                              the group.
//   config.json                the Hugging Face config (export copies it)
//
// Under parallel.tensor = T > 1 each tensor-parallel part is such a set of
// data-parallel rank files, shard.tp<t>.rank<R>.safetensors, R < world_size
// (the data-parallel ranks); the index adds "tensor_parallel": T and per
// tensor "split_dim" (0 rows, 1 columns, -1 replicated), its "shape" and
// "offset" being a part's (every part has the same layout). Export
// reassembles the whole tensors; a resume under another T cuts its part
// from the old parts' whole groups.
//   run_config.toml, trainer_state.json ("format": "sharded"), written by
//                              the lead last, once every rank's file is in
//                              place: the marker of a complete folder.
//
// ranges[R] is GroupShard::of(numel, R, N) at every ZeRO stage: at stage 0
// (replicated) each rank still writes a 1/N slice, so the save is parallel
// and the folder has the same shape whatever the stage.
//
// Resharding on load: a rank of the new world size reads, for each group,
// the elements it owns under the new sharding (the whole group for the
// weights at stages 0-2 and for the optimizer at stage 0) from the old rank
// files whose ranges overlap them, as byte ranges of those files. The
// consolidated format's optimizer files (optimizer.safetensors, or
// optimizer.rank<R>.safetensors with ranges GroupShard::of(numel, R, S))
// reshard the same way. A state tensor that is not elementwise can only be
// resumed under the sharding that wrote it (a UsageError says so).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/param_group.h"
#include "model/transformer.h"
#include "parallel/zero.h"
#include "train/optimizer.h"
#include "train/shard_index.h"
#include "train/train_state.h"

namespace headroom {

// The checks a resume makes before anything is written: the index describes
// `model` (same groups, tensor names and shapes) in `dtype`.
void check_sharded_checkpoint(const ShardIndex& index, const std::vector<GroupLayout>& layouts,
                              DType dtype);

// The lead, before any rank writes: makes `dir` and removes a
// trainer_state.json in it (a folder being rewritten is not complete).
void prepare_sharded_folder(const std::string& dir);
// Every rank: writes shard[.tp<T>].rank<rank>.safetensors into `dir`
// (temporary + rename; `rank` of `world_size` data-parallel ranks, T this
// rank's tensor-parallel part). No collective.
void save_shard(Backend& backend, Transformer& model, Zero& zero, AdamW& optimizer,
                const std::string& dir, int rank, int world_size);
// The lead: shard_index.json and config.json.
void save_shard_index(Transformer& model, Zero& zero, AdamW& optimizer, const std::string& dir,
                      int world_size);

// Loads the base weights of `model` from a sharded checkpoint (any world
// size, any parallel.tensor): each group of this rank's part assembled from
// the rank files (from every old part's whole group when the tensor-parallel
// size differs), then written as load_weights does (under ZeRO-3 each rank
// keeps its shard).
void load_sharded_weights(Backend& backend, Transformer& model, const ShardIndex& index);

// Fills `optimizer`'s state (this rank's shards under the current sharding)
// from the checkpoint in `dir`, sharded or consolidated, written by any
// world size; `state` is its trainer_state.json, `sharded_optimizer`
// whether this run's ranks each hold a shard of the states (ZeRO >= 1 on
// several ranks). A missing tensor or file, another dtype, or a
// non-elementwise tensor under another sharding is a UsageError naming the
// file and the tensor. `part`: as load_train_state's.
void load_optimizer_resharded(AdamW& optimizer, const std::vector<GroupLayout>& layouts,
                              const std::string& dir, const TrainState& state, int rank,
                              int world_size, bool sharded_optimizer,
                              const TensorParallelPart& part = {});

// `headroom export --checkpoint DIR --out OUT`: the Hugging Face
// model.safetensors (byte for byte what a consolidated checkpoint of the
// same weights holds) and config.json, streamed tensor by tensor from the
// rank files. An existing OUT/model.safetensors is replaced only with
// `overwrite`. Returns the bytes of the weights file.
uint64_t export_sharded(const std::string& dir, const std::string& out, bool overwrite);

}  // namespace headroom
