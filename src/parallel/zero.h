// Zero: data-parallel sharding of a model's flat groups (ZeRO, Rajbhandari
// et al. 2020), by stage, over a Communicator.
//
//   stage 0  parameters and gradients whole on every rank; the gradients are
//            all-reduced after the step's micro-batches.
//   stage 1  as 0, but each rank's optimizer updates only its shard of each
//            group; the updated groups are all-gathered (phase gather).
//   stage 2  as 1, and the gradients are sharded: a group's whole gradient
//            buffer exists only while its backward runs; when that ends it is
//            reduce-scattered (phase reduce) into this rank's shard and freed.
//   stage 3  as 2, and the parameters are sharded: a group is all-gathered
//            before each use (forward, backward, save) and freed after;
//            `prefetch` groups further along the pass are gathered ahead.
//
// A group is padded to a multiple of the world size and cut into equal
// shards (GroupShard); the padding a rank holds is allocated, under its own
// tag "<group>.grads.zero_padding" / "<group>.params.zero_padding" (the
// optimizer pads its states the same way), because it is real memory in
// DeepSpeed and FSDP too.
//
// A group that is not trainable (a frozen base under LoRA) has parameters
// only: sharded and gathered as any other at stage 3, but no gradients, no
// reduction and no optimizer state.
//
// Every rank makes the same calls in the same order, so the collectives
// match; with a simulated communicator (plan) the same allocations happen
// and nothing moves.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "model/group_residency.h"
#include "model/param_group.h"

namespace headroom {

struct ZeroOptions {
  int stage = 0;     // 0..3
  int prefetch = 0;  // stage 3: groups gathered ahead of the one in use
};

class Zero final : public GroupResidency {
 public:
  // `backend` and `comm` must outlive this object; `dtype` is the
  // parameters' (and gradients') type.
  Zero(Backend& backend, Communicator& comm, DType dtype, const ZeroOptions& options);
  // Waits (in stream order) for the gathers still pending, so the groups
  // they write may be freed after.
  ~Zero() override;
  Zero(const Zero&) = delete;
  Zero& operator=(const Zero&) = delete;

  // GroupResidency: the model (constructed with this residency) hands over
  // its group vectors; stages 0-1 allocate them whole, stages 2-3 allocate
  // this rank's shards (and padding), all in the current phase (init).
  void bind(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
            std::vector<FlatGroup>& grads) override;
  void acquire_params(size_t g, std::span<const size_t> ahead) override;
  void release_params(size_t g) override;
  void begin_params_write(size_t g) override;
  void end_params_write(size_t g) override;
  void acquire_grads(size_t g) override;
  void release_grads(size_t g) override;

  // For a model that allocated its own whole groups (constructed without a
  // residency): manage them at stage 0 or 1. Nothing is allocated.
  void adopt(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
             std::vector<FlatGroup>& grads);

  int stage() const { return options_.stage; }
  Communicator& comm() { return comm_; }
  size_t num_groups() const { return shards_.size(); }
  // The part of group g this rank's optimizer updates: all of it at stage 0
  // (or on one rank), else GroupShard::of(numel, rank, world_size).
  const GroupShard& shard(size_t g) const { return shards_[g]; }
  // Whether the optimizer's states are cut into shards over several ranks.
  bool shards_optimizer() const { return options_.stage >= 1 && comm_.world_size() > 1; }
  // Group g's parameters inside shard(g), as a 1-D tensor that lives as long
  // as this object (a view of the whole group at stages 0-2, this rank's own
  // buffer at stage 3); undefined when the shard is all padding.
  Tensor param_shard(size_t g);
  // The same for the gradients, summed over ranks once finish_grads() ran;
  // undefined for a group that is not trainable.
  Tensor grad_shard(size_t g);

  // After a step's micro-batches: stages 0-1 all-reduce every group's
  // gradients (phase reduce) on several ranks; stages 2-3 have already
  // reduce-scattered each group as its backward ended.
  void finish_grads();
  // The squared global gradient norm over every rank's shards (host double;
  // NaN or inf when any gradient is not finite). Call after finish_grads().
  // With a tensor group (tensor parallelism: this Zero's communicator is the
  // data-parallel one), the views `split(g, i)` names are one rank's part of
  // a tensor split over the group, so their squares are summed over it; the
  // others are replicated, the same on every rank of the group, and counted
  // once.
  double grad_sum_of_squares(Communicator* tensor_group = nullptr,
                             const std::function<bool(size_t g, size_t i)>& split = {});
  // After the optimizer updated this rank's shards: stages 1-2 all-gather
  // every group's parameters (phase gather); 0 and 3 need nothing.
  void finish_step();
  // Zeroes what holds gradients between micro-batches (whole groups at
  // stages 0-1, this rank's shards at 2-3).
  void zero_grads();
  // Groups gathered and not yet released (0 between steps, or a use was not
  // paired).
  size_t groups_in_flight() const;

 private:
  // Takes the model's vectors and cuts the shards; allocates nothing.
  void attach(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
              std::vector<FlatGroup>& grads);
  std::vector<int64_t> counts(size_t g) const;  // every rank's shard numel
  // Stage 3: params[g] <- all shards; `ahead` (a prefetch) only starts the
  // gather (Communicator::start_all_gather_in_place), settle(g) ends it.
  void gather(size_t g, bool ahead);
  void settle(size_t g);

  Backend& backend_;
  Communicator& comm_;
  DType dtype_;
  ZeroOptions options_;
  const std::vector<GroupLayout>* layouts_ = nullptr;
  std::vector<FlatGroup>* params_ = nullptr;
  std::vector<FlatGroup>* grads_ = nullptr;
  std::vector<GroupShard> shards_;
  std::vector<Tensor> param_shards_;   // stage 3: (shard) persistent
  std::vector<Tensor> grad_shards_;    // stages 2-3: (shard) persistent accumulators
  std::vector<Tensor> param_padding_;  // per group: this rank's padding, or undefined
  std::vector<Tensor> grad_padding_;
  std::vector<bool> acquired_;          // stage 3: params[g] in use (not only fetched ahead)
  std::vector<PendingGather> pending_;  // stage 3: a prefetch's gather not yet waited for
};

}  // namespace headroom
