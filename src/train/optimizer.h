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

// Which shard of every group's optimizer state this rank keeps: ZeRO stage
// >= 1 on world_size ranks; world_size 1 keeps everything.
struct OptimizerSharding {
  int rank = 0;
  int world_size = 1;
};

class AdamW {
 public:
  // Allocates, in phase init, category optim: m and v (fp32) per group and,
  // for bf16 parameters, an fp32 master copy cast from the current values
  // (so call it after the weights are initialized or loaded). Sharded, each
  // of them covers only this rank's GroupShard of the group, and a rank whose
  // shard runs past the group's end also holds that padding, as one
  // "<group>.zero_padding" allocation (ZeRO pads every group to a multiple of
  // the world size; the padding is real memory on the last ranks).
  AdamW(Backend& backend, const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
        const AdamWConfig& config, OptimizerSharding sharding = {});

  // One update with learning rate lr; grad_scale multiplies the gradients
  // first (clipping). Weight decay skips norm weights and biases, as the
  // Hugging Face Trainer does. `step` counts from 1 (bias correction).
  // Sharded, only this rank's shard of the parameters is updated; the caller
  // all-gathers the groups afterwards.
  void step(std::vector<FlatGroup>& grads, float lr, float grad_scale, int64_t step);

  // This rank's shard of group g.
  const GroupShard& shard(size_t g) const { return shards_[g]; }

  // What a checkpoint must hold to resume exactly, as (name, fp32 buffer):
  // "<group>.adam_m", "<group>.adam_v" and, for bf16 parameters,
  // "<group>.master", in group order; sharded, this rank's shards.
  std::vector<std::pair<std::string, Tensor*>> state();

 private:
  Backend& backend_;
  const std::vector<GroupLayout>& layouts_;
  std::vector<FlatGroup>& params_;
  AdamWConfig config_;
  std::vector<GroupShard> shards_;
  std::vector<Tensor> master_;   // (shard) fp32; undefined for fp32 params or an empty shard
  std::vector<Tensor> m_;        // (shard)
  std::vector<Tensor> v_;        // (shard)
  std::vector<Tensor> padding_;  // per group: the states' padding, or undefined
};

// Sum of squares of every gradient, on the host (double); NaN or inf when
// any gradient is not finite.
double grad_sum_of_squares(Backend& backend, std::vector<FlatGroup>& grads);

}  // namespace headroom
