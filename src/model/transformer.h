// A Llama / Qwen2 / Qwen3 decoder, forward and backward written out per op
// (llm.c style, no autograd), on whatever Backend it is given: cpu computes,
// meta only allocates, so `plan` makes exactly the run's allocations.
//
// Parameters live in flat groups (param_group.h): "embed" (the token table),
// "block.<l>" for each layer, and "head" (final norm and, when untied,
// lm_head). Gradients mirror them in the parameters' dtype.
//
// With LoRA (Hu et al. 2021, as PEFT does it) those groups are frozen base
// weights (no gradients, no optimizer state) and each block gets a trainable
// group "lora.<l>" holding, per target projection W (out, in), A (r, in) and
// B (out, r) under PEFT's names; the projection becomes
//   y = x W^T + (alpha / r) * (dropout(x) A^T) B^T.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/linear_cross_entropy.h"
#include "data/batch.h"
#include "model/group_residency.h"
#include "model/model_config.h"
#include "model/param_group.h"

namespace headroom {

// The projections LoRA can adapt, in PEFT's module names and this order.
enum LoraTarget : int {
  kLoraQ,
  kLoraK,
  kLoraV,
  kLoraO,
  kLoraGate,
  kLoraUp,
  kLoraDown,
  kNumLoraTargets
};
// "q_proj", "k_proj", ..., "down_proj".
const char* lora_target_name(LoraTarget target);

struct LoraOptions {
  bool enabled = false;
  int64_t rank = 16;
  float alpha = 32.0f;  // the update is scaled by alpha / rank
  float dropout = 0.0f;
  std::vector<LoraTarget> targets = {kLoraQ, kLoraV};
  uint64_t seed = 0;           // A's init (B starts at zero)
  bool gaussian_init = false;  // A ~ N(0, 1/r) (PEFT's "gaussian"); else Kaiming-uniform
};

struct TransformerOptions {
  DType dtype = DType::kF32;          // parameters, activations and their gradients
  int64_t attention_block_size = 64;  // the kernel's tile edge
  AttentionMaskKind attention_mask = AttentionMaskKind::kDocument;
  int64_t attention_window = 0;      // sliding_window only
  int64_t attention_mask_block = 0;  // dflash_block only
  // attention.backend = "dense_additive": PyTorch's SDPA math path under a
  // 4-D additive mask (Backend::dense_attention_*), instead of block-sparse
  // flash attention.
  bool attention_dense = false;
  // Dense attention's (B, S): padded batches have a row per document, packed
  // ones are one row holding the whole pack (as Hugging Face sees a pack).
  bool rows_are_documents = false;
  // 0: keep every block's activations; k: blocks l with l % k == 0 keep only
  // their input and recompute the rest inside backward ("full" is k = 1).
  int checkpoint_interval = 0;
  LinearCrossEntropyOptions loss;
  LoraOptions lora;
  // run.seed: the randomness drawn during steps (the dropout masks), apart
  // from the seeds of initialization (model.seed, lora.seed).
  uint64_t step_seed = 0;
};

// Indices of a block group's views, in the order of block_layout().
enum BlockParam : int {
  kAttnNorm,  // (C)            input_layernorm
  kWq,        // (H*D, C)       self_attn.q_proj
  kWk,        // (KV*D, C)
  kWv,        // (KV*D, C)
  kWo,        // (C, H*D)
  kMlpNorm,   // (C)            post_attention_layernorm
  kWGate,     // (F, C)
  kWUp,       // (F, C)
  kWDown,     // (C, F)
  kBq,        // (H*D)          Qwen2 only (attention_bias)
  kBk,        // (KV*D)
  kBv,        // (KV*D)
  kQNorm,     // (D)            Qwen3 only (qk_norm)
  kKNorm,     // (D)
  kNumBlockParams,
};

class Transformer {
 public:
  // Allocates parameters (category param) and gradients (category grad),
  // in phase init. Values are uninitialized until init_random() or a load.
  // With a `residency` (which must outlive the model) the model allocates
  // neither: the residency decides what lives where (ZeRO), and the model
  // announces every use of a group to it.
  Transformer(Backend& backend, const ModelConfig& config, const TransformerOptions& options,
              GroupResidency* residency = nullptr);

  // Seeded init (docs/model.md): every matrix ~ U(-a, a) with a = 0.02*sqrt(3)
  // (std 0.02, as Hugging Face's initializer_range), norm weights 1, biases 0.
  // Adapters as PEFT's default (init_lora_weights = True): A Kaiming-uniform
  // (U(-1/sqrt(in), 1/sqrt(in)), seeded by lora.seed), B zero, so the model
  // starts as exactly the base model.
  void init_random(uint64_t seed);
  // Only the adapters, as init_random does them (after loading a base).
  void init_adapters();

  // Folds every adapter into its base projection, W += (alpha / r) B A (in
  // the model's dtype, one rounding per element), for `export --merge`; the
  // adapters stay as they were, so the merged base alone now computes what
  // base and adapters computed together (without dropout).
  void merge_adapters();

  // The randomness of the next forward_backward (LoRA dropout masks) comes
  // from options.step_seed and this stream; the trainer sets it from the step, the
  // micro-batch and the rank, so a resumed run draws the same masks.
  void set_random_stream(uint64_t stream) { random_stream_ = stream; }

  // Forward, loss and backward of one micro-batch. Gradients are accumulated
  // (call zero_grads() between optimizer steps); loss_sum (1) fp32
  // accumulates the summed token losses; loss_scale is d(loss)/d(loss_sum),
  // normally 1 / counted tokens of the whole step.
  void forward_backward(const Batch& batch, float loss_scale, Tensor& loss_sum);

  // Zeroes the gradient groups that are allocated (all of them without a
  // residency; a residency zeroes what it keeps itself).
  void zero_grads();

  // Group g's parameters, whole, between the calls (a collective under ZeRO-3:
  // every rank must make it), for reading (save) or overwriting (load, init).
  void acquire_params(size_t g, std::span<const size_t> ahead = {});
  void release_params(size_t g);
  void begin_params_write(size_t g);
  void end_params_write(size_t g);

  const ModelConfig& config() const { return config_; }
  const TransformerOptions& options() const { return options_; }
  // Groups in order: embed, block.0 .. block.L-1, head, then with LoRA
  // lora.0 .. lora.L-1. The first num_base_groups() are the base model's
  // (Hugging Face names), the rest the adapters' (PEFT names).
  const std::vector<GroupLayout>& layouts() const { return layouts_; }
  size_t num_base_groups() const { return static_cast<size_t>(config_.num_layers) + 2; }
  bool frozen_base() const { return options_.lora.enabled; }
  // Group g's entry is whole (flat defined) while it is acquired; without a
  // residency, always.
  std::vector<FlatGroup>& params() { return params_; }
  std::vector<FlatGroup>& grads() { return grads_; }

 private:
  struct BlockSaved;
  const Tensor& block_param(int64_t layer, BlockParam p) const;
  // The gradient of a block parameter, or an undefined tensor when the base
  // is frozen (the ops then skip it).
  Tensor block_grad(int64_t layer, BlockParam p);
  bool has_adapter(LoraTarget t) const { return lora_index_[t] >= 0; }
  // y += (alpha / r) * (dropout(x) A^T) B^T for block l's adapter t, saving
  // what its backward needs in `saved`.
  void adapter_forward(int64_t layer, LoraTarget t, const Tensor& x, Tensor& y, BlockSaved& saved);
  // dx += the adapter's part of the input gradient; dA, dB accumulated.
  void adapter_backward(int64_t layer, LoraTarget t, const Tensor& dy, Tensor& dx,
                        BlockSaved& saved);
  uint64_t dropout_seed(int64_t layer, LoraTarget t) const;
  size_t adapter_group(int64_t layer) const {
    return num_base_groups() + static_cast<size_t>(layer);
  }
  const Tensor& lm_head() const;
  Tensor lm_head_grad();  // undefined when the base is frozen
  BlockSaved block_forward(int64_t layer, const Tensor& x, const Batch& batch, bool keep_all);
  bool is_checkpointed(int64_t layer) const;
  void acquire_grads(size_t g);
  void release_grads(size_t g);
  Tensor block_backward(int64_t layer, BlockSaved& saved, const Tensor& dy, const Batch& batch);

  Backend& backend_;
  ModelConfig config_;
  TransformerOptions options_;
  AttentionParams attention_;
  std::vector<GroupLayout> layouts_;
  GroupResidency* residency_;     // nullptr: every group allocated whole, once
  std::vector<int> block_index_;  // BlockParam -> view index in the block group, -1 if absent
  std::vector<int> lora_index_;   // LoraTarget -> view index of A in a lora group (B follows), -1
  std::vector<size_t> forward_order_;   // groups read by forward, in order (for fetching ahead)
  std::vector<size_t> backward_order_;  // blocks read by backward, in order
  uint64_t random_stream_ = 0;
  std::vector<FlatGroup> params_;
  std::vector<FlatGroup> grads_;
  Tensor positions_;  // (T) int32, on the backend for the micro-batch in flight
  // (B, 1, S, S) dense attention's additive mask, built once per micro-batch
  // after the embedding (as HF's model forward builds it) and released after
  // forward, or after backward when checkpointed blocks recompute with it.
  Tensor dense_mask_;
  Tensor d_out_;  // gradient handed from the loss phase to the backward phase
};

// The layouts of a model's groups (embed, blocks, head), with HF names; with
// LoRA those are frozen and the adapter groups follow.
std::vector<GroupLayout> transformer_layouts(const ModelConfig& config,
                                             const LoraOptions& lora = {});

}  // namespace headroom
