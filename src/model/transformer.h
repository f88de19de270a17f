// A Llama / Qwen2 / Qwen3 decoder, forward and backward written out per op
// (llm.c style, no autograd), on whatever Backend it is given: cpu computes,
// meta only allocates, so `plan` makes exactly the run's allocations.
//
// Parameters live in flat groups (param_group.h): "embed" (the token table),
// "block.<l>" for each layer, and "head" (final norm and, when untied,
// lm_head). Gradients mirror them in the parameters' dtype.
//
// With LoRA (lora.h) those groups are frozen base weights (no gradients, no
// optimizer state) and each block gets a trainable group "lora.<l>"
// (layouts.h); with NF4 the frozen block projections are 4-bit (QLoRA).
// Every projection is one call (projection.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/linear_cross_entropy.h"
#include "data/batch.h"
#include "model/group_residency.h"
#include "model/layouts.h"
#include "model/lora.h"
#include "model/model_config.h"
#include "model/param_group.h"
#include "model/projection.h"
#include "model/tensor_parallel.h"

namespace headroom {

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
  // model.quantization = "nf4" (QLoRA; needs lora.enabled): the block
  // projections of the frozen base live in NF4 storage of the model's own
  // (category param, tags "block.<l>.<q_proj|...>.nf4[.absmax...]"),
  // quantized from model-dtype staging at init and load, dequantized per
  // use (projection.h). Embeddings, norms and the head stay in `dtype`.
  bool nf4 = false;
  bool nf4_double_quant = false;  // model.double_quant
  // parallel.tensor: this rank's part of every block (tensor_parallel.h);
  // the layouts are the part's. Not yet with NF4 (checked).
  TensorParallel tensor_parallel;
  // run.seed: the randomness drawn during steps (the dropout masks), apart
  // from the seeds of initialization (model.seed, lora.seed).
  uint64_t step_seed = 0;
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

  // Quantizes `dense` (spec i's shape, fp32 or bf16) into the NF4 storage of
  // spec i of group g, a quantized spec (layouts.h): how init and load fill
  // the NF4 base.
  void quantize_param(size_t g, size_t i, const Tensor& dense);

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

  // Whether view i of group g holds this rank's part of a tensor split over
  // the tensor-parallel group (a block projection or bias), rather than a
  // replicated one; false without tensor parallelism.
  bool splits_over_tensor_group(size_t g, size_t i) const;
  // The dimension view i of group g is split along (0 rows, 1 columns), or
  // -1 when it is not split.
  int split_dim(size_t g, size_t i) const;
  // Group g as any parallel.tensor splits it (whole shapes, and the
  // dimension each spec is cut along), also when this run's is 1: what
  // reading a checkpoint of another tensor-parallel size needs.
  SplitGroup split_group(size_t g) const;

  // Spec i of group g's shape in the whole model: the spec's own shape
  // unless it is split over the tensor-parallel group.
  Shape whole_shape(size_t g, size_t i) const;
  // Writes this rank's part of the split spec i of group g from the whole
  // tensor's values on the host (whole_shape(g, i), the view's dtype);
  // between begin_params_write(g) and end_params_write(g). Nothing on meta.
  void write_part(size_t g, size_t i, const void* whole);
  // The whole tensor of the split spec i of group g, gathered from the
  // tensor-parallel group's parts into `whole` on the host (whole_shape(g,
  // i), the view's dtype; through a workspace tensor "<group>.gather"). A
  // collective: every rank of the group calls it; with group g acquired.
  void gather_whole(size_t g, size_t i, std::vector<char>& whole);

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
  // split_dim's rule, whatever this run's parallel.tensor.
  int split_dim_under_tensor_parallelism(size_t g, size_t i) const;
  struct BlockSaved;
  const Tensor& block_param(int64_t layer, BlockParam p) const;
  // The gradient of a block parameter, or an undefined tensor when the base
  // is frozen (the ops then skip it).
  Tensor block_grad(int64_t layer, BlockParam p);
  bool has_adapter(LoraTarget t) const { return lora_index_[t] >= 0; }
  // Block l's projection t, its weight dense or NF4, its adapter if any;
  // with `backward` also the gradients it accumulates (acquired then).
  Projection projection(int64_t layer, LoraTarget t, bool backward);
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
  // The sum of `partial` over the tensor-parallel group, in place (nothing
  // without tensor parallelism).
  void sum_over_tensor_group(Tensor& partial, const std::string& tag);
  // parallel.sequence: this rank's rows [first, second) of T tokens, the
  // (T, C) tensor `rows` gathered from every rank's rows (a new tensor of
  // `category`, `tag`), and this rank's rows of the group's sum of the
  // partial (T, C) `partial` (reduce-scattered in place, then copied out).
  std::pair<int64_t, int64_t> sequence_rows(int64_t tokens) const;
  Tensor gather_sequence(const Tensor& rows, int64_t tokens, Category category,
                         const std::string& tag);
  Tensor scatter_sequence(Tensor& partial, Category category, const std::string& tag);
  // Without sequence parallelism the sum of `partial` over the group (in
  // place, returned); with it this rank's rows of that sum.
  Tensor sum_rows_over_tensor_group(Tensor& partial, Category category, const std::string& tag);
  // The (T, C) tensor whose rows this rank holds: gathered under sequence
  // parallelism, `rows` itself otherwise.
  Tensor whole_sequence(const Tensor& rows, int64_t tokens, Category category,
                        const std::string& tag);
  // whole_sequence of a saved normed input for the weights' gradients
  // (activations); undefined when it was not kept (a frozen base).
  Tensor whole_sequence_if_kept(const Tensor& rows, int64_t tokens, const std::string& tag);
  // project_backward of projection t; under parallel.tensor its adapter's
  // replicated half's gradient summed over the group.
  void project_backward_of(LoraTarget t, Projection& p, const Tensor& dy, const Tensor& x,
                           Tensor& dx, float beta, AdapterSaved& saved);
  // dw += the group's sum of this rank's rmsnorm_backward weight gradient:
  // for a norm applied to this rank's heads only (q/k norm), or to its rows
  // only (sequence parallelism); plain rmsnorm_backward otherwise
  // (`partial` false).
  void rmsnorm_backward_of_own_heads(const Tensor& dy, const Tensor& x, const Tensor& w,
                                     const Tensor& rstd, Tensor& dx, Tensor& dw,
                                     const std::string& tag, bool partial = true);
  // Spec i of group g drawn as a tensor-parallel run of one rank would draw
  // it (`seed`, its whole shape), and this rank's part kept.
  void fill_uniform_part(size_t g, size_t i, uint64_t seed, float bound);

  Backend& backend_;
  ModelConfig config_;
  TransformerOptions options_;
  AttentionParams attention_;
  std::vector<GroupLayout> layouts_;
  // This rank's heads, kv heads and intermediate width (the model's / N).
  int64_t heads_ = 0, kv_heads_ = 0, ffn_ = 0;
  GroupResidency* residency_;     // nullptr: every group allocated whole, once
  std::vector<int> block_index_;  // BlockParam -> view index in the block group, -1 if absent
  std::vector<int> lora_index_;   // LoraTarget -> view index of A in a lora group (B follows), -1
  std::vector<size_t> forward_order_;   // groups read by forward, in order (for fetching ahead)
  std::vector<size_t> backward_order_;  // blocks read by backward, in order
  uint64_t random_stream_ = 0;
  std::vector<FlatGroup> params_;
  std::vector<FlatGroup> grads_;
  // options.nf4: per layer, the NF4 storage of each projection (layouts.h's
  // quantized specs); empty otherwise.
  std::vector<std::array<Nf4Weight, kNumLoraTargets>> nf4_;
  Tensor positions_;  // (T) int32, on the backend for the micro-batch in flight
  // (B, 1, S, S) dense attention's additive mask, built once per micro-batch
  // after the embedding (as HF's model forward builds it) and released after
  // forward, or after backward when checkpointed blocks recompute with it.
  Tensor dense_mask_;
  Tensor d_out_;  // gradient handed from the loss phase to the backward phase
};

}  // namespace headroom
