// AdamW over flat parameter groups, in the forms the users' systems keep it.
//
// Bytes per trainable parameter with bf16 weights (2 param + 2 grad, then):
//
//   optimizer.kind  master_dtype  master  moments            total   modelled on
//   adamw           fp32          4       4 + 4              16      torch AdamW under AMP,
//                                                                    DeepSpeed bf16 (16Ψ)
//   adamw           bf16          2       4 + 4              14      a bf16 copy (below)
//   adamw           none          0       4 + 4              12      AdamW on bf16 weights
//                                                                    (seed 003's 2 + 2 + 8)
//   adamw_8bit      any of these  4/2/0   1 + 1 + 8/256      ~6-10   bitsandbytes AdamW8bit
//
// master_dtype = "none" is seed 003's accounting, and what bitsandbytes'
// 32-bit AdamW (bnb.optim.AdamW, optim_bits=32, paged or not) does to bf16
// weights: fp32 m and v, the weights updated in place. The update is
// computed in fp32 from the bf16 weight, in torch.optim.AdamW's order, and
// rounded to nearest even into it once per step (no stochastic rounding),
// so a step below half a bf16 ulp is lost. (Plain torch.optim.AdamW on a
// bf16 model would also keep its moments in bf16, zeros_like(p): 8 bytes
// per parameter; not modelled.)
// "bf16" keeps a separate bf16 copy that the update is made on and the
// weights are copied from: DeepSpeed's bf16_master_weights_and_grads
// option of its ZeRO optimizer with bf16_optimizer_states off (the
// DeepSpeedExamples training/bf16_master_weight setup; the gradients are
// bf16 here in every setting, as the model's are). Numerically it is "none"; it costs 2 bytes per
// parameter more, and in a ZeRO shard the master is 1/N of them. The moments
// stay fp32 in both.
//
// optimizer.kind = "adamw_8bit" is bitsandbytes 0.50's AdamW8bit
// (bnb.optim.AdamW8bit, block_wise=True, optim_bits=8, min_8bit_size=4096,
// percentile_clipping=100): each parameter of at least min_8bit_size
// elements keeps m and v as one uint8 code per element into the signed /
// unsigned dynamic map, with one fp32 absmax per block of 256 elements
// (backend/common/dynamic_map.h, Backend::adamw8bit_update); smaller ones
// (norm weights, biases) keep fp32 moments and take the 32-bit update, as
// bitsandbytes does. Whether a parameter is 8-bit is decided on its whole
// size, so every rank decides alike; under ZeRO a parameter's part in this
// rank's shard is quantized in blocks of 256 counted from the part's start,
// the last one partial (as the last block of any tensor bitsandbytes
// quantizes), so the codes of a rank never depend on another's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/param_group.h"

namespace headroom {

// optimizer.master_dtype.
enum class MasterWeights : uint8_t { kFp32, kBf16, kNone };
std::string_view name_of(MasterWeights master);  // "fp32", "bf16", "none"

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  MasterWeights master = MasterWeights::kFp32;  // for bf16 parameters
  bool eight_bit = false;                       // optimizer.kind = "adamw_8bit"
  int64_t min_8bit_size = 4096;                 // bitsandbytes' default
};

class AdamW {
 public:
  // Allocates, in phase init, category optim, for each of `param_shards`
  // (param_shards[g] is the part `shards[g]` of group g that this rank
  // updates, a 1-D tensor that stays put; undefined when the shard is all
  // padding):
  //   "<group>.master"        (shard) for bf16 parameters with master fp32
  //                           (fp32) or bf16 (bf16), copied from their current
  //                           values (so construct it after the weights are
  //                           initialized or loaded); none with "none"
  //   "<group>.adam_m", "<group>.adam_v"   (n32) fp32: the moments of the
  //                           parameters with fp32 moments (all of them for
  //                           kind "adamw")
  //   "<group>.adam_m8", "<group>.adam_v8" (n8) uint8 codes, and
  //   "<group>.adam_m8.absmax", "<group>.adam_v8.absmax" (blocks) fp32: the
  //                           8-bit moments (kind "adamw_8bit")
  // each only when not empty. With `padded`, a shard that runs past its
  // group's end also holds that padding, as one "<group>.zero_padding"
  // allocation (uint8) of the bytes the padding's states would take: ZeRO
  // pads every group to a multiple of the world size, and the padding is
  // real memory on the last ranks. A group that is not trainable gets
  // nothing and is never updated.
  //
  // With `offload` (ZeRO-Offload, zero.offload_optimizer; it must outlive
  // this object) the master and the moments live on that backend (the
  // host) instead, and so does the update: each step copies a group's
  // gradient shard (and, with no master, its parameters) to the host,
  // updates there, and copies the parameters back, through transfer buffers
  // of category comm ("<group>.offload.*") on the host. The master is then
  // kept for fp32 parameters too: it is the host's copy of them.
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

  // What a checkpoint must hold to resume exactly, as (name, buffer), each
  // in its own dtype: the tensors the constructor names ("<group>.adam_m",
  // ..., "<group>.master" for bf16 parameters), in group order; sharded,
  // this rank's shards. They live on state_backend().
  std::vector<std::pair<std::string, Tensor*>> state();
  Backend& state_backend() { return states_; }

 private:
  // Where parameter i of group g lies in this rank's shard, and in the
  // state buffers.
  struct Part {
    size_t spec = 0;   // index into the group's specs
    int64_t from = 0;  // shard-relative element range [from, to)
    int64_t to = 0;
    bool eight_bit = false;
    int64_t at = 0;     // first element in m/v (fp32) or m8/v8 (uint8)
    int64_t block = 0;  // first absmax block (8-bit parts)
  };
  struct GroupState {
    Tensor master;              // (shard) fp32 or bf16; undefined: none
    Tensor m, v;                // (n32) fp32
    Tensor m8, v8;              // (n8) uint8 codes
    Tensor m_absmax, v_absmax;  // (blocks) fp32
    Tensor padding;             // the states' padding, or undefined
    std::vector<Part> parts;
  };

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
  std::vector<Tensor> params_;  // (shard) this rank's part of each group
  std::vector<GroupState> groups_;
};

}  // namespace headroom
