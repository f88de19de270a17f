// AdamW over flat parameter groups, with fp32 master weights when the
// parameters are bf16 (mixed precision: 2 bytes param + 2 grad + 4 master +
// 4 + 4 Adam states = 16 bytes per parameter, ZeRO's 16Ψ).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/param_group.h"

namespace headroom {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  // Allocates, in phase init, category optim: m and v (fp32) for each of
  // `param_shards` (param_shards[g] is the part `shards[g]` of group g that
  // this rank updates, a 1-D tensor that stays put; undefined when the shard
  // is all padding) and, for bf16 parameters, an fp32 master copy cast from
  // their current values (so construct it after the weights are initialized
  // or loaded). With `padded`, a shard that runs past its group's end also
  // holds that padding, as one "<group>.zero_padding" allocation: ZeRO pads
  // every group to a multiple of the world size, and the padding is real
  // memory on the last ranks. A group that is not trainable gets nothing and
  // is never updated.
  //
  // With `offload` (ZeRO-Offload, zero.offload_optimizer; it must outlive
  // this object) the master, m, v and padding live on that backend (the
  // host) instead, and so does the update: each step copies a group's
  // gradient shard to the host, updates there, and copies the parameters
  // back, through transfer buffers of category comm ("<group>.offload.*")
  // on the host. The master is then kept for fp32 parameters too: it is the
  // host's copy of them.
  AdamW(Backend& backend, const std::vector<GroupLayout>& layouts, std::vector<GroupShard> shards,
        std::vector<Tensor> param_shards, const AdamWConfig& config, bool padded,
        Backend* offload = nullptr);
  // Whole groups (one rank).
  AdamW(Backend& backend, const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
        const AdamWConfig& config);

  // One update of the parameter shards with learning rate lr from
  // `grad_shards` (laid out as the parameter shards); grad_scale multiplies
  // the gradients first (clipping). Weight decay skips norm weights and
  // biases, as the Hugging Face Trainer does. `step` counts from 1 (bias
  // correction). Sharded, the caller puts the groups back together after.
  void step(const std::vector<Tensor>& grad_shards, float lr, float grad_scale, int64_t step);

  // This rank's shard of group g.
  const GroupShard& shard(size_t g) const { return shards_[g]; }

  // What a checkpoint must hold to resume exactly, as (name, fp32 buffer):
  // "<group>.adam_m", "<group>.adam_v" and, for bf16 parameters,
  // "<group>.master", in group order; sharded, this rank's shards. They
  // live on state_backend().
  std::vector<std::pair<std::string, Tensor*>> state();
  Backend& state_backend() { return states_; }

 private:
  // Between the parameters' backend and the states' (offload); nothing on
  // meta, where no value exists.
  void to_states(const Tensor& src, Tensor& dst);
  void from_states(const Tensor& src, Tensor& dst);

  Backend& backend_;
  Backend& states_;  // backend_, or the offload backend
  bool offloaded_;
  bool mixed_;  // bf16 parameters
  const std::vector<GroupLayout>& layouts_;
  AdamWConfig config_;
  std::vector<GroupShard> shards_;
  std::vector<Tensor> params_;   // (shard) this rank's part of each group
  std::vector<Tensor> master_;   // (shard) fp32; undefined for fp32 params (unless offloaded)
  std::vector<Tensor> m_;        // (shard)
  std::vector<Tensor> v_;        // (shard)
  std::vector<Tensor> padding_;  // per group: the states' padding, or undefined
};

}  // namespace headroom
