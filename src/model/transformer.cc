#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "comm/communicator.h"
#include "model/vocab_parallel_loss.h"
#include "util/error.h"

namespace headroom {

namespace {

std::string tag(int64_t l, const char* what) {
  return "block." + std::to_string(l) + "." + what;
}

}  // namespace

// What forward keeps for backward. A checkpointed block keeps only `x` and
// rebuilds the rest at the start of its backward.
struct Transformer::BlockSaved {
  Tensor x;                   // (T, C)      block input
  Tensor h;                   // (T, C)      input_layernorm output; under parallel.sequence
                              //             this rank's (R, C) rows, gathered again in backward
  Tensor rstd1;               // (T)
  Tensor q_pre, k_pre;        // (T, H*D), (T, KV*D) before q/k norm (Qwen3 only)
  Tensor rstd_q, rstd_k;      // (T*H), (T*KV)
  Tensor q, k, v;             // (T, H*D), (T, KV*D), (T, KV*D) after norm and rope
  Tensor att;                 // (T, H*D)    attention output, before o_proj
  Tensor lse;                 // (H, T)      logsumexp; the (T, T) scores are never stored
  DenseAttentionSaved dense;  // attention.backend = "dense_additive" instead of q, k, v, lse
  Tensor x2;                  // (T, C)      after the attention residual
  Tensor h2;                  // (T, C)      post_attention_layernorm output (as h)
  Tensor rstd2;               // (T)
  Tensor gate, up;            // (T, F)
  Tensor act;                 // (T, F)      silu(gate) * up
  Tensor y;                   // (T, C)      block output (handed to the next block)
  // Per adapted projection: its (dropped-out) input x (T, in), for dA, and
  // x A^T (T, r), for dB. Without dropout x shares the block's own tensor.
  AdapterSaved lora[kNumLoraTargets];
};

Transformer::Transformer(Backend& backend, const ModelConfig& config,
                         const TransformerOptions& options, GroupResidency* residency)
    : backend_(backend),
      config_(config),
      options_(options),
      layouts_(
          transformer_layouts(config, options.lora, options.nf4, options.tensor_parallel.size)),
      residency_(residency) {
  const TensorParallel& tp = options.tensor_parallel;
  if (const std::string problem = tensor_parallel_problem(config, tp.size); !problem.empty())
    throw UsageError(config.name + ": " + problem);
  HR_CHECK(!tp.enabled() ||
               (tp.group && tp.group->world_size() == tp.size && tp.group->rank() == tp.rank),
           "tensor parallelism needs its group's communicator");
  HR_CHECK(!tp.enabled() || !options.nf4, "tensor parallelism with NF4 is not implemented yet");
  heads_ = config.num_heads / tp.size;
  kv_heads_ = config.num_kv_heads / tp.size;
  ffn_ = config.intermediate_size / tp.size;
  attention_.heads = heads_;
  attention_.kv_heads = kv_heads_;
  attention_.head_dim = config.head_dim;
  attention_.block_size = options.attention_block_size;
  attention_.mask = options.attention_mask;
  attention_.window = options.attention_window;
  attention_.mask_block = options.attention_mask_block;
  attention_.scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));

  block_index_.assign(kNumBlockParams, -1);
  for (int p = 0; p < kMlpNorm + 4; ++p)
    block_index_[p] = p;
  int next = kWDown + 1;
  if (config.attention_bias)
    block_index_[kBq] = next++, block_index_[kBk] = next++, block_index_[kBv] = next++;
  if (config.qk_norm) block_index_[kQNorm] = next++, block_index_[kKNorm] = next++;
  lora_index_.assign(kNumLoraTargets, -1);
  if (options.lora.enabled) {
    HR_CHECK(options.lora.rank >= 1 && !options.lora.targets.empty(),
             "LoRA needs a rank >= 1 and at least one target");
    int view = 0;
    for (int t = 0; t < kNumLoraTargets; ++t)
      if (options.lora.targets_contain(static_cast<LoraTarget>(t)))
        lora_index_[t] = view, view += 2;
  }
  // An NF4 weight has no gradient (bitsandbytes' Params4bit): only adapters train.
  HR_CHECK(!options.nf4 || options.lora.enabled, "an NF4 base needs LoRA adapters to train");
  // The order forward and backward read the base groups in: what a
  // residency may fetch ahead. Adapters are small and fetched on use.
  for (size_t g = 0; g < num_base_groups(); ++g)
    forward_order_.push_back(g);
  for (int64_t l = config.num_layers - 1; l >= 0; --l)
    backward_order_.push_back(static_cast<size_t>(l + 1));

  PhaseScope scope(backend.allocator(), Phase::kInit);
  if (residency_) {
    params_.resize(layouts_.size());
    grads_.resize(layouts_.size());
    residency_->bind(layouts_, params_, grads_);
  } else {
    for (const GroupLayout& layout : layouts_)
      params_.push_back(FlatGroup::allocate(backend, layout, options.dtype, Category::kParam,
                                            layout.name + ".params"));
    for (const GroupLayout& layout : layouts_)
      grads_.push_back(layout.trainable
                           ? FlatGroup::allocate(backend, layout, options.dtype, Category::kGrad,
                                                 layout.name + ".grads")
                           : FlatGroup{});
    zero_grads();
  }
  // The NF4 base is the model's own, whole on every rank: a residency (ZeRO
  // stage <= 2 here, config/rules.cc) holds the flat groups only.
  if (options.nf4) {
    for (int64_t l = 0; l < config.num_layers; ++l) {
      std::array<Nf4Weight, kNumLoraTargets>& layer = nf4_.emplace_back();
      for (int t = 0; t < kNumLoraTargets; ++t) {
        const LoraTarget target = static_cast<LoraTarget>(t);
        const auto [out, in] = projection_shape(config, target);
        layer[static_cast<size_t>(t)] = backend.nf4_empty(
            {out, in}, options.nf4_double_quant, Category::kParam,
            "block." + std::to_string(l) + "." + lora_target_name(target) + ".nf4");
      }
    }
  }
}

const Tensor& Transformer::block_param(int64_t layer, BlockParam p) const {
  return params_[static_cast<size_t>(layer + 1)].views[static_cast<size_t>(block_index_[p])];
}

Tensor Transformer::block_grad(int64_t layer, BlockParam p) {
  if (frozen_base()) return Tensor();
  return grads_[static_cast<size_t>(layer + 1)].views[static_cast<size_t>(block_index_[p])];
}

const Tensor& Transformer::lm_head() const {
  return config_.tie_word_embeddings ? params_.front().views[0]
                                     : params_[num_base_groups() - 1].views[1];
}

Tensor Transformer::lm_head_grad() {
  if (frozen_base()) return Tensor();
  const FlatGroup& head = grads_[num_base_groups() - 1];
  return config_.tie_word_embeddings ? grads_.front().views[0] : head.views[1];
}

void Transformer::acquire_params(size_t g, std::span<const size_t> ahead) {
  if (residency_) residency_->acquire_params(g, ahead);
}

void Transformer::release_params(size_t g) {
  if (residency_) residency_->release_params(g);
}

void Transformer::begin_params_write(size_t g) {
  if (residency_) residency_->begin_params_write(g);
}

void Transformer::end_params_write(size_t g) {
  if (residency_) residency_->end_params_write(g);
}

void Transformer::acquire_grads(size_t g) {
  if (residency_) residency_->acquire_grads(g);
}

void Transformer::release_grads(size_t g) {
  if (residency_) residency_->release_grads(g);
}

void Transformer::init_random(uint64_t seed) {
  const float a = 0.02f * std::sqrt(3.0f);
  uint64_t stream = 0;
  for (size_t g = 0; g < num_base_groups(); ++g) {
    begin_params_write(g);
    for (size_t i = 0; i < params_[g].views.size(); ++i) {
      Tensor& w = params_[g].views[i];
      const std::string& name = layouts_[g].specs[i].name;
      const bool is_norm = name.find("norm.weight") != std::string::npos ||
                           name.find("layernorm.weight") != std::string::npos;
      const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
      if (layouts_[g].specs[i].quantized) {
        // The values a dense init would draw, quantized (an NF4 base
        // without model.weights is for plans and tests).
        Tensor staging = backend_.empty(layouts_[g].specs[i].shape, options_.dtype,
                                        Category::kWorkspace, layouts_[g].name + ".staging");
        backend_.fill_uniform(staging, seed * 1000003 + stream, -a, a);
        quantize_param(g, i, staging);
      } else if (is_norm) {
        backend_.fill(w, 1.0f);
      } else if (is_bias) {
        backend_.fill(w, 0.0f);
      } else if (splits_over_tensor_group(g, i)) {
        fill_uniform_part(g, i, seed * 1000003 + stream, a);
      } else {
        backend_.fill_uniform(w, seed * 1000003 + stream, -a, a);
      }
      ++stream;
    }
    end_params_write(g);
  }
  init_adapters();
}

void Transformer::init_adapters() {
  for (size_t g = num_base_groups(); g < layouts_.size(); ++g) {
    begin_params_write(g);
    for (size_t i = 0; i < params_[g].views.size(); i += 2) {
      // parallel.tensor: an A split by columns (under o or down) is drawn
      // whole, as one rank draws it, and this rank keeps its columns.
      const bool split = splits_over_tensor_group(g, i);
      const Shape whole = whole_shape(g, i);  // (r, in)
      Tensor lora_a = split ? backend_.empty(whole, params_[g].views[i].dtype(),
                                             Category::kWorkspace, "lora.init")
                            : params_[g].views[i];
      const uint64_t seed = options_.lora.seed * 1000003 + 7919 * g + i;
      if (options_.lora.gaussian_init) {
        // PEFT's "gaussian": normal_(A, std = 1 / r), drawn on the host and
        // rounded once into A's dtype.
        Tensor wide = backend_.empty(whole, DType::kF32, Category::kWorkspace, "lora.init");
        if (backend_.kind() != BackendKind::kMeta) {
          std::mt19937_64 rng(seed);
          std::normal_distribution<float> normal(0.0f,
                                                 1.0f / static_cast<float>(options_.lora.rank));
          std::vector<float> values(static_cast<size_t>(lora_a.numel()));
          for (float& v : values)
            v = normal(rng);
          backend_.copy_from_host(values.data(), wide);
        }
        if (lora_a.dtype() == DType::kF32) {
          backend_.copy(wide, lora_a);
        } else {
          Tensor narrow = backend_.cast(wide, lora_a.dtype(), Category::kWorkspace, "lora.init");
          backend_.copy(narrow, lora_a);
        }
      } else {
        // PEFT's default: kaiming_uniform_(A, a=sqrt(5)) is U(-1/sqrt(in), 1/sqrt(in)).
        const float bound = 1.0f / std::sqrt(static_cast<float>(whole[1]));
        backend_.fill_uniform(lora_a, seed, -bound, bound);
      }
      if (split && backend_.kind() != BackendKind::kMeta) {
        std::vector<unsigned char> values(lora_a.nbytes());
        backend_.copy_to_host(lora_a, values.data());
        write_part(g, i, values.data());
      }
      backend_.fill(params_[g].views[i + 1], 0.0f);
    }
    end_params_write(g);
  }
}

void Transformer::quantize_param(size_t g, size_t i, const Tensor& dense) {
  HR_CHECK(g >= 1 && g + 1 < num_base_groups() && layouts_[g].specs[i].quantized,
           "quantize_param: " + layouts_[g].specs[i].name + " is not stored in NF4");
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (block_index_[weight_of(static_cast<LoraTarget>(t))] == static_cast<int>(i)) {
      backend_.nf4_quantize(dense, nf4_[g - 1][static_cast<size_t>(t)]);
      return;
    }
  throw InternalError("quantize_param: no projection at view " + std::to_string(i));
}

Projection Transformer::projection(int64_t l, LoraTarget t, bool backward) {
  Projection p;
  const BlockParam weight = weight_of(t);
  if (options_.nf4)
    p.nf4 = &nf4_[static_cast<size_t>(l)][static_cast<size_t>(t)];
  else
    p.weight = &block_param(l, weight);
  if (config_.attention_bias && t <= kLoraV) {
    const BlockParam bias = t == kLoraQ ? kBq : t == kLoraK ? kBk : kBv;
    p.bias = &block_param(l, bias);
    if (backward) p.d_bias = block_grad(l, bias);
  }
  if (backward) p.d_weight = block_grad(l, weight);
  p.tag = tag(l, projection_tag(t));
  if (has_adapter(t)) {
    const size_t g = adapter_group(l), ia = static_cast<size_t>(lora_index_[t]);
    p.adapter.a = params_[g].views[ia];      // (r, in)
    p.adapter.b = params_[g].views[ia + 1];  // (out, r)
    if (backward) {
      p.adapter.d_a = grads_[g].views[ia];
      p.adapter.d_b = grads_[g].views[ia + 1];
    }
    p.adapter.scale = options_.lora.alpha / static_cast<float>(options_.lora.rank);
    p.adapter.dropout = options_.lora.dropout;
    p.adapter.dropout_seed = dropout_seed(l, t);
    p.adapter.tag = p.tag + ".lora";
  }
  return p;
}

void Transformer::merge_adapters() {
  HR_CHECK(frozen_base(), "merge_adapters on a model without LoRA");
  // It writes the base in place: the model must hold its groups itself.
  HR_CHECK(residency_ == nullptr, "merge_adapters on a model whose groups a residency holds");
  // Merging rounds into the dense base; an NF4 base would be requantized.
  HR_CHECK(!options_.nf4, "merge_adapters on an NF4 base: merge into the dense base instead");
  const float scale = options_.lora.alpha / static_cast<float>(options_.lora.rank);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const size_t lora = adapter_group(l);
    for (int t = 0; t < kNumLoraTargets; ++t) {
      if (!has_adapter(static_cast<LoraTarget>(t))) continue;
      const size_t ia = static_cast<size_t>(lora_index_[t]);
      Tensor w = block_param(l, weight_of(static_cast<LoraTarget>(t)));  // (out, in)
      backend_.gemm(params_[lora].views[ia + 1], false, params_[lora].views[ia], false, w, scale,
                    1.0f);  // (out, in) += s * (out, r) @ (r, in)
    }
  }
}

void Transformer::zero_grads() {
  for (FlatGroup& g : grads_)
    if (g.flat.defined()) backend_.fill(g.flat, 0.0f);
}

Transformer::BlockSaved Transformer::block_forward(int64_t l, const Tensor& x, const Batch& batch,
                                                   bool keep_all) {
  Backend& b = backend_;
  const DType dt = options_.dtype;
  const int64_t T = batch.size(), C = config_.hidden_size, F = ffn_;
  const int64_t H = heads_, KV = kv_heads_, D = config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const float theta = static_cast<float>(config_.rope_theta);

  // parallel.sequence: x, the residuals and the norms hold this rank's R
  // rows of T; the normed inputs of the projections are gathered whole for
  // them and only their rows are kept, gathered again in backward for the
  // weights' gradients (Korthikanti et al. 2022: one all-gather more per
  // sublayer saves (T - R) x C of each).
  const bool sp = options_.tensor_parallel.sequence;
  const int64_t R = x.size(0);
  BlockSaved s;
  s.x = x;
  s.h = b.empty({R, C}, dt, Category::kActivation,
                tag(l, sp ? "attn_norm.out.rows" : "attn_norm.out"));
  s.rstd1 = b.empty({R}, DType::kF32, Category::kActivation, tag(l, "attn_norm.rstd"));
  b.rmsnorm_forward(x, block_param(l, kAttnNorm), eps, s.h, s.rstd1);

  {
    const Tensor h = whole_sequence(s.h, T, Category::kActivation, tag(l, "attn_norm.out"));
    s.q = b.empty({T, H * D}, dt, Category::kActivation, tag(l, "attn.q"));
    s.k = b.empty({T, KV * D}, dt, Category::kActivation, tag(l, "attn.k"));
    s.v = b.empty({T, KV * D}, dt, Category::kActivation, tag(l, "attn.v"));
    // q, k and v read one h: widened once where gemms widen (a copy of h
    // that lives no longer than these three; Backend::share_gemm_operand).
    const SharedGemmOperand shared_h = b.share_gemm_operand(h);
    project_forward(b, projection(l, kLoraQ, false), h, s.q, s.lora[kLoraQ]);  // (T, HD)
    project_forward(b, projection(l, kLoraK, false), h, s.k, s.lora[kLoraK]);  // (T, KVD)
    project_forward(b, projection(l, kLoraV, false), h, s.v, s.lora[kLoraV]);
  }
  if (config_.qk_norm) {
    // Per-head RMSNorm over D: (T, H*D) viewed as (T*H, D).
    s.q_pre = s.q;
    s.k_pre = s.k;
    s.q = b.empty({T, H * D}, dt, Category::kActivation, tag(l, "attn.q_normed"));
    s.k = b.empty({T, KV * D}, dt, Category::kActivation, tag(l, "attn.k_normed"));
    s.rstd_q = b.empty({T * H}, DType::kF32, Category::kActivation, tag(l, "attn.q_norm.rstd"));
    s.rstd_k = b.empty({T * KV}, DType::kF32, Category::kActivation, tag(l, "attn.k_norm.rstd"));
    Tensor q_rows = s.q.view({T * H, D}), k_rows = s.k.view({T * KV, D});
    b.rmsnorm_forward(s.q_pre.view({T * H, D}), block_param(l, kQNorm), eps, q_rows, s.rstd_q);
    b.rmsnorm_forward(s.k_pre.view({T * KV, D}), block_param(l, kKNorm), eps, k_rows, s.rstd_k);
  }
  b.rope_forward(s.q, positions_, D, theta);
  b.rope_forward(s.k, positions_, D, theta);

  if (options_.attention_dense) {
    s.att =
        b.dense_attention_forward(s.q, s.k, s.v, dense_mask_, attention_, tag(l, "attn"), s.dense);
    // Autograd keeps the math path's fp32 copies, none of q, k, v themselves
    // (an fp32 model without GQA keeps v, through s.dense.value).
    s.q = Tensor(), s.k = Tensor(), s.v = Tensor();
  } else {
    s.att = b.empty({T, H * D}, dt, Category::kActivation, tag(l, "attn.out"));
    s.lse = b.empty({H, T}, DType::kF32, Category::kAttention, tag(l, "attn.lse"));
    b.attention_forward(s.q, s.k, s.v, batch.cu_seqlens, attention_, s.att, s.lse);
  }

  {
    Tensor o = b.empty({T, C}, dt, Category::kActivation, tag(l, "attn.o_proj"));
    project_forward(b, projection(l, kLoraO, false), s.att, o, s.lora[kLoraO]);  // (T, C)
    // Row-parallel: a partial sum (this rank's rows of it, under sequence
    // parallelism).
    o = sum_rows_over_tensor_group(o, Category::kActivation, tag(l, "attn.o_proj"));
    s.x2 = b.empty({R, C}, dt, Category::kActivation, tag(l, "attn.residual"));
    b.add(x, o, s.x2);
  }

  s.h2 =
      b.empty({R, C}, dt, Category::kActivation, tag(l, sp ? "mlp_norm.out.rows" : "mlp_norm.out"));
  s.rstd2 = b.empty({R}, DType::kF32, Category::kActivation, tag(l, "mlp_norm.rstd"));
  b.rmsnorm_forward(s.x2, block_param(l, kMlpNorm), eps, s.h2, s.rstd2);
  s.gate = b.empty({T, F}, dt, Category::kActivation, tag(l, "mlp.gate"));
  s.up = b.empty({T, F}, dt, Category::kActivation, tag(l, "mlp.up"));
  {
    const Tensor h2 = whole_sequence(s.h2, T, Category::kActivation, tag(l, "mlp_norm.out"));
    const SharedGemmOperand shared_h2 = b.share_gemm_operand(h2);  // as h above
    project_forward(b, projection(l, kLoraGate, false), h2, s.gate, s.lora[kLoraGate]);  // (T, F)
    project_forward(b, projection(l, kLoraUp, false), h2, s.up, s.lora[kLoraUp]);
  }
  s.act = b.empty({T, F}, dt, Category::kActivation, tag(l, "mlp.act"));
  b.swiglu_forward(s.gate, s.up, s.act);

  {
    Tensor m = b.empty({T, C}, dt, Category::kActivation, tag(l, "mlp.down"));
    project_forward(b, projection(l, kLoraDown, false), s.act, m, s.lora[kLoraDown]);  // (T, C)
    m = sum_rows_over_tensor_group(m, Category::kActivation, tag(l, "mlp.down"));
    // The next block's input: kept alone, as a checkpoint, when that block
    // recomputes its activations.
    const bool next_checkpointed = is_checkpointed(l + 1);
    s.y = b.empty({R, C}, dt, next_checkpointed ? Category::kCheckpoint : Category::kActivation,
                  tag(l, "out"));
    b.add(s.x2, m, s.y);
  }

  if (!keep_all) {
    Tensor input = s.x, output = s.y;
    s = BlockSaved{};
    s.x = input;
    s.y = output;
  } else if (frozen_base()) {
    // A frozen projection's input is needed only for its weight's gradient:
    // as in PyTorch, it is not kept (an adapter keeps its own reference).
    s.h = Tensor(), s.h2 = Tensor(), s.act = Tensor();
  }
  return s;
}

Tensor Transformer::block_backward(int64_t l, BlockSaved& s, const Tensor& dy, const Batch& batch) {
  Backend& b = backend_;
  const DType dt = options_.dtype;
  const int64_t T = batch.size(), C = config_.hidden_size, F = ffn_;
  const int64_t H = heads_, KV = kv_heads_, D = config_.head_dim;
  const float theta = static_cast<float>(config_.rope_theta);

  // parallel.sequence: dy and the residuals' gradients hold this rank's R
  // rows; the row-parallel projections' backward reads them gathered.
  const bool sp = options_.tensor_parallel.sequence;
  const int64_t R = dy.size(0);
  // MLP: y = x2 + down(silu(gate(h2)) * up(h2))
  Tensor d_act = b.empty({T, F}, dt, Category::kActivation, tag(l, "mlp.act.grad"));
  {
    Projection down = projection(l, kLoraDown, true);
    const Tensor dm = whole_sequence(dy, T, Category::kActivation, tag(l, "mlp.down.grad"));
    project_backward_of(kLoraDown, down, dm, s.act, d_act, 0.0f, s.lora[kLoraDown]);  // (T, F)
  }
  s.act = Tensor();
  Tensor d_gate = b.empty({T, F}, dt, Category::kActivation, tag(l, "mlp.gate.grad"));
  Tensor d_up = b.empty({T, F}, dt, Category::kActivation, tag(l, "mlp.up.grad"));
  b.swiglu_backward(d_act, s.gate, s.up, d_gate, d_up);
  d_act = Tensor(), s.gate = Tensor(), s.up = Tensor();
  Tensor d_h2 = b.empty({T, C}, dt, Category::kActivation, tag(l, "mlp_norm.out.grad"));
  {
    Projection gate = projection(l, kLoraGate, true), up = projection(l, kLoraUp, true);
    const Tensor h2 = whole_sequence_if_kept(s.h2, T, tag(l, "mlp_norm.out"));
    project_backward_of(kLoraGate, gate, d_gate, h2, d_h2, 0.0f, s.lora[kLoraGate]);  // (T, C)
    project_backward_of(kLoraUp, up, d_up, h2, d_h2, 1.0f, s.lora[kLoraUp]);
  }
  // Column-parallel: partial (this rank's rows of the sum, under sequence
  // parallelism).
  d_h2 = sum_rows_over_tensor_group(d_h2, Category::kActivation, tag(l, "mlp_norm.out.grad"));
  d_gate = Tensor(), d_up = Tensor(), s.h2 = Tensor();
  Tensor dx2 = b.empty({R, C}, dt, Category::kActivation, tag(l, "attn.residual.grad"));
  Tensor dw_mlp_norm = block_grad(l, kMlpNorm);
  rmsnorm_backward_of_own_heads(d_h2, s.x2, block_param(l, kMlpNorm), s.rstd2, dx2, dw_mlp_norm,
                                tag(l, "mlp_norm.grad"), sp);
  d_h2 = Tensor(), s.x2 = Tensor(), s.rstd2 = Tensor();
  b.add(dx2, dy, dx2);  // the residual path

  // Attention: x2 = x + o_proj(attention(rope(norm(q)), rope(norm(k)), v))
  Tensor d_att = b.empty({T, H * D}, dt, Category::kActivation, tag(l, "attn.out.grad"));
  {
    Projection o = projection(l, kLoraO, true);
    const Tensor d_o = whole_sequence(dx2, T, Category::kActivation, tag(l, "attn.o_proj.grad"));
    project_backward_of(kLoraO, o, d_o, s.att, d_att, 0.0f, s.lora[kLoraO]);  // (T, HD)
  }
  Tensor dq, dk, dv;
  if (options_.attention_dense) {
    s.att = Tensor();  // o_proj's saved input goes once its backward ran
    DenseAttentionGrads grads =
        b.dense_attention_backward(d_att, s.dense, attention_, tag(l, "attn"));
    d_att = Tensor();
    dq = grads.dq, dk = grads.dk, dv = grads.dv;
  } else {
    dq = b.empty({T, H * D}, dt, Category::kActivation, tag(l, "attn.q.grad"));
    dk = b.empty({T, KV * D}, dt, Category::kActivation, tag(l, "attn.k.grad"));
    dv = b.empty({T, KV * D}, dt, Category::kActivation, tag(l, "attn.v.grad"));
    b.attention_backward(d_att, s.q, s.k, s.v, s.att, s.lse, batch.cu_seqlens, attention_, dq, dk,
                         dv);
    d_att = Tensor(), s.att = Tensor(), s.lse = Tensor(), s.q = Tensor(), s.k = Tensor();
  }
  b.rope_backward(dq, positions_, D, theta);
  b.rope_backward(dk, positions_, D, theta);
  if (config_.qk_norm) {
    Tensor dq_pre = b.empty({T, H * D}, dt, Category::kActivation, tag(l, "attn.q_pre.grad"));
    Tensor dk_pre = b.empty({T, KV * D}, dt, Category::kActivation, tag(l, "attn.k_pre.grad"));
    Tensor dq_rows = dq_pre.view({T * H, D}), dk_rows = dk_pre.view({T * KV, D});
    Tensor dw_q_norm = block_grad(l, kQNorm), dw_k_norm = block_grad(l, kKNorm);
    rmsnorm_backward_of_own_heads(dq.view({T * H, D}), s.q_pre.view({T * H, D}),
                                  block_param(l, kQNorm), s.rstd_q, dq_rows, dw_q_norm,
                                  tag(l, "attn.q_norm.grad"));
    rmsnorm_backward_of_own_heads(dk.view({T * KV, D}), s.k_pre.view({T * KV, D}),
                                  block_param(l, kKNorm), s.rstd_k, dk_rows, dw_k_norm,
                                  tag(l, "attn.k_norm.grad"));
    dq = dq_pre, dk = dk_pre;
    s.q_pre = Tensor(), s.k_pre = Tensor(), s.rstd_q = Tensor(), s.rstd_k = Tensor();
  }
  Tensor d_h = b.empty({T, C}, dt, Category::kActivation, tag(l, "attn_norm.out.grad"));
  {
    Projection q = projection(l, kLoraQ, true), k = projection(l, kLoraK, true),
               v = projection(l, kLoraV, true);
    const Tensor h = whole_sequence_if_kept(s.h, T, tag(l, "attn_norm.out"));
    project_backward_of(kLoraQ, q, dq, h, d_h, 0.0f, s.lora[kLoraQ]);  // (T, C)
    project_backward_of(kLoraK, k, dk, h, d_h, 1.0f, s.lora[kLoraK]);
    project_backward_of(kLoraV, v, dv, h, d_h, 1.0f, s.lora[kLoraV]);
  }
  d_h = sum_rows_over_tensor_group(d_h, Category::kActivation, tag(l, "attn_norm.out.grad"));
  dq = Tensor(), dk = Tensor(), dv = Tensor(), s.h = Tensor(), s.v = Tensor();
  Tensor dx = b.empty({R, C}, dt, Category::kActivation, tag(l, "in.grad"));
  Tensor dw_attn_norm = block_grad(l, kAttnNorm);
  rmsnorm_backward_of_own_heads(d_h, s.x, block_param(l, kAttnNorm), s.rstd1, dx, dw_attn_norm,
                                tag(l, "attn_norm.grad"), sp);
  d_h = Tensor(), s.rstd1 = Tensor(), s.x = Tensor();
  b.add(dx, dx2, dx);
  return dx;
}

int Transformer::split_dim(size_t g, size_t i) const {
  return options_.tensor_parallel.enabled() ? split_dim_under_tensor_parallelism(g, i) : -1;
}

SplitGroup Transformer::split_group(size_t g) const {
  std::vector<ParamSpec> specs;
  std::vector<int> dims;
  for (size_t i = 0; i < layouts_[g].specs.size(); ++i) {
    specs.push_back(layouts_[g].specs[i]);
    specs.back().shape = whole_shape(g, i);
    dims.push_back(split_dim_under_tensor_parallelism(g, i));
  }
  SplitGroup group{GroupLayout::make(layouts_[g].name, std::move(specs)), std::move(dims)};
  group.whole.trainable = layouts_[g].trainable;
  return group;
}

int Transformer::split_dim_under_tensor_parallelism(size_t g, size_t i) const {
  const int view = static_cast<int>(i);
  if (g >= num_base_groups()) {
    // An adapter splits like its projection: B (out, r) by rows under a
    // column-parallel one, A (r, in) by columns under a row-parallel one;
    // the other half is replicated.
    for (int t = 0; t < kNumLoraTargets; ++t) {
      if (lora_index_[t] < 0) continue;
      const bool rows = splits_output_rows(static_cast<LoraTarget>(t));
      if (view == lora_index_[t]) return rows ? -1 : 1;
      if (view == lora_index_[t] + 1) return rows ? 0 : -1;
    }
    return -1;
  }
  // The embedding and an untied head by vocabulary rows.
  if (g == 0) return 0;
  if (g + 1 == num_base_groups()) return i == 1 ? 0 : -1;
  if (view == block_index_[kWo] || view == block_index_[kWDown]) return 1;
  for (BlockParam p : {kWq, kWk, kWv, kWGate, kWUp, kBq, kBk, kBv})
    if (block_index_[p] == view) return 0;
  return -1;
}

bool Transformer::splits_over_tensor_group(size_t g, size_t i) const {
  return split_dim(g, i) >= 0;
}

void Transformer::project_backward_of(LoraTarget t, Projection& p, const Tensor& dy,
                                      const Tensor& x, Tensor& dx, float beta,
                                      AdapterSaved& saved) {
  if (!options_.tensor_parallel.enabled() || !p.adapter.defined()) {
    project_backward(backend_, p, dy, x, dx, beta, saved);
    return;
  }
  // The adapter's replicated half (A under a column-parallel projection, B
  // under a row-parallel one) gets this rank's part of its gradient only:
  // that micro-batch's part is summed over the group, then accumulated.
  Tensor& replicated = splits_output_rows(t) ? p.adapter.d_a : p.adapter.d_b;
  if (!replicated.defined()) {
    project_backward(backend_, p, dy, x, dx, beta, saved);
    return;
  }
  Tensor accumulated = replicated;
  const std::string what = p.adapter.tag + (splits_output_rows(t) ? ".a" : ".b") + ".grad_part";
  replicated = backend_.empty(accumulated.shape(), accumulated.dtype(), Category::kGrad, what);
  backend_.fill(replicated, 0.0f);
  Tensor part = replicated;
  project_backward(backend_, p, dy, x, dx, beta, saved);
  sum_over_tensor_group(part, what);
  backend_.add(accumulated, part, accumulated);
}

std::pair<int64_t, int64_t> Transformer::sequence_rows(int64_t tokens) const {
  const TensorParallel& tp = options_.tensor_parallel;
  return {tokens * tp.rank / tp.size, tokens * (tp.rank + 1) / tp.size};
}

namespace {

// Every rank's rows of T tokens times `width` elements each.
std::vector<int64_t> sequence_counts(int64_t tokens, int64_t width, int size) {
  std::vector<int64_t> counts;
  for (int r = 0; r < size; ++r)
    counts.push_back((tokens * (r + 1) / size - tokens * r / size) * width);
  return counts;
}

}  // namespace

Tensor Transformer::gather_sequence(const Tensor& rows, int64_t tokens, Category category,
                                    const std::string& what) {
  const TensorParallel& tp = options_.tensor_parallel;
  const int64_t width = rows.size(1);
  Tensor whole = backend_.empty({tokens, width}, rows.dtype(), category, what);
  const auto [first, last] = sequence_rows(tokens);
  Tensor mine = whole.rows(first, last);
  backend_.copy(rows, mine);
  // The collectives cut a flat buffer by element counts.
  Tensor flat = whole.view({tokens * width});
  tp.group->all_gather_in_place(flat, sequence_counts(tokens, width, tp.size));
  return whole;
}

Tensor Transformer::scatter_sequence(Tensor& partial, Category category, const std::string& what) {
  const TensorParallel& tp = options_.tensor_parallel;
  const int64_t tokens = partial.size(0), width = partial.size(1);
  Tensor flat = partial.view({tokens * width});
  tp.group->reduce_scatter_sum_in_place(backend_, flat, sequence_counts(tokens, width, tp.size),
                                        what);
  const auto [first, last] = sequence_rows(tokens);
  Tensor rows = backend_.empty({last - first, width}, partial.dtype(), category, what + ".rows");
  backend_.copy(partial.rows(first, last), rows);
  return rows;
}

Tensor Transformer::sum_rows_over_tensor_group(Tensor& partial, Category category,
                                               const std::string& what) {
  if (options_.tensor_parallel.sequence) return scatter_sequence(partial, category, what);
  sum_over_tensor_group(partial, what);
  return partial;
}

Tensor Transformer::whole_sequence(const Tensor& rows, int64_t tokens, Category category,
                                   const std::string& what) {
  if (!options_.tensor_parallel.sequence) return rows;
  return gather_sequence(rows, tokens, category, what);
}

Tensor Transformer::whole_sequence_if_kept(const Tensor& rows, int64_t tokens,
                                           const std::string& what) {
  return rows.defined() ? whole_sequence(rows, tokens, Category::kActivation, what) : Tensor();
}

void Transformer::sum_over_tensor_group(Tensor& partial, const std::string& what) {
  const TensorParallel& tp = options_.tensor_parallel;
  if (tp.enabled()) tp.group->all_reduce_sum(backend_, partial, what);
}

void Transformer::rmsnorm_backward_of_own_heads(const Tensor& dy, const Tensor& x, const Tensor& w,
                                                const Tensor& rstd, Tensor& dx, Tensor& dw,
                                                const std::string& what, bool partial) {
  if (!options_.tensor_parallel.enabled() || !dw.defined() || !partial) {
    backend_.rmsnorm_backward(dy, x, w, rstd, dx, dw);
    return;
  }
  // dw accumulates over micro-batches: only this micro-batch's part is
  // summed over the group, then added.
  Tensor part = backend_.empty(dw.shape(), dw.dtype(), Category::kGrad, what);
  backend_.fill(part, 0.0f);
  backend_.rmsnorm_backward(dy, x, w, rstd, dx, part);
  sum_over_tensor_group(part, what);
  backend_.add(dw, part, dw);
}

Shape Transformer::whole_shape(size_t g, size_t i) const {
  Shape whole = layouts_[g].specs[i].shape;
  const int dim = split_dim(g, i);
  if (dim >= 0) whole[static_cast<size_t>(dim)] *= options_.tensor_parallel.size;
  return whole;
}

void Transformer::write_part(size_t g, size_t i, const void* whole) {
  const TensorParallel& tp = options_.tensor_parallel;
  Tensor& part = params_[g].views[i];
  HR_CHECK(splits_over_tensor_group(g, i),
           "write_part: " + layouts_[g].specs[i].name + " is not split over the group");
  if (backend_.kind() == BackendKind::kMeta) return;
  const Shape full = whole_shape(g, i);
  const int64_t in = full.size() > 1 ? full[1] : 1;
  const int64_t rows = part.size(0), cols = part.dim() > 1 ? part.size(1) : 1;
  const bool by_columns = cols != in;
  const int64_t row0 = by_columns ? 0 : tensor_parallel_part(full[0], tp.rank, tp.size).first;
  const int64_t col0 = by_columns ? tensor_parallel_part(in, tp.rank, tp.size).first : 0;
  const size_t element = size_of(part.dtype());
  const auto* from = static_cast<const unsigned char*>(whole);
  std::vector<unsigned char> mine(static_cast<size_t>(part.numel()) * element);
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(from + static_cast<size_t>((row0 + r) * in + col0) * element,
                static_cast<size_t>(cols) * element,
                mine.data() + static_cast<size_t>(r * cols) * element);
  backend_.copy_from_host(mine.data(), part);
}

void Transformer::gather_whole(size_t g, size_t i, std::vector<char>& whole) {
  const TensorParallel& tp = options_.tensor_parallel;
  HR_CHECK(splits_over_tensor_group(g, i),
           "gather_whole: " + layouts_[g].specs[i].name + " is not split over the group");
  const Tensor& part = params_[g].views[i];
  const Shape full = whole_shape(g, i);
  const int64_t n = part.numel();
  Tensor parts = backend_.empty({n * tp.size}, part.dtype(), Category::kWorkspace,
                                layouts_[g].name + ".gather");
  Tensor mine = parts.rows(tp.rank * n, (tp.rank + 1) * n).view(part.shape());
  backend_.copy(part, mine);
  tp.group->all_gather_in_place(parts, std::vector<int64_t>(static_cast<size_t>(tp.size), n));
  whole.resize(parts.nbytes());
  if (backend_.kind() == BackendKind::kMeta) return;
  const int64_t in = full.size() > 1 ? full[1] : 1;
  const int64_t rows = part.size(0), cols = part.dim() > 1 ? part.size(1) : 1;
  if (cols == in) {  // split by rows: the parts in rank order are the whole
    backend_.copy_to_host(parts, whole.data());
    return;
  }
  // Split by columns: part p holds columns [p cols, (p + 1) cols) of each row.
  std::vector<char> gathered(parts.nbytes());
  backend_.copy_to_host(parts, gathered.data());
  const size_t element = size_of(part.dtype()), row_bytes = static_cast<size_t>(cols) * element;
  for (int p = 0; p < tp.size; ++p)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(whole.data() + static_cast<size_t>(r * in + p * cols) * element,
                  gathered.data() + static_cast<size_t>(p * n + r * cols) * element, row_bytes);
}

void Transformer::fill_uniform_part(size_t g, size_t i, uint64_t seed, float bound) {
  // The whole projection as one rank draws it, then this rank's rows or
  // columns of it: a run of N ranks starts from the same weights as a run
  // of one (the counter-based draw depends on the element's index in the
  // whole tensor). Through the host, once, at init.
  Tensor& part = params_[g].views[i];
  Tensor whole = backend_.empty(whole_shape(g, i), part.dtype(), Category::kWorkspace,
                                layouts_[g].name + ".init");
  backend_.fill_uniform(whole, seed, -bound, bound);
  if (backend_.kind() == BackendKind::kMeta) return;
  std::vector<unsigned char> values(whole.nbytes());
  backend_.copy_to_host(whole, values.data());
  write_part(g, i, values.data());
}

uint64_t Transformer::dropout_seed(int64_t layer, LoraTarget t) const {
  // splitmix64's finalizer over the inputs: distinct masks per adapter,
  // layer and micro-batch, the same in forward, recompute and backward.
  // Under parallel.tensor a projection that splits its input (o_proj,
  // down_proj: each rank its own columns) draws its mask per rank; the
  // others take the whole activation on every rank of the group, which must
  // drop the same elements.
  const uint64_t part =
      splits_output_rows(t) ? 0 : static_cast<uint64_t>(options_.tensor_parallel.rank) << 32;
  uint64_t z = options_.step_seed ^ (random_stream_ * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(layer) << 8) ^ static_cast<uint64_t>(t) ^ part;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool Transformer::is_checkpointed(int64_t layer) const {
  const int k = options_.checkpoint_interval;
  return k > 0 && layer < config_.num_layers && layer % k == 0;
}

void Transformer::forward_backward(const Batch& batch, float loss_scale, Tensor& loss_sum) {
  Backend& b = backend_;
  Allocator& allocator = b.allocator();
  const DType dt = options_.dtype;
  const int64_t T = batch.size(), C = config_.hidden_size, L = config_.num_layers;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  HR_CHECK(T > 0, "empty micro-batch");
  constexpr size_t kEmbed = 0;
  const size_t head = num_base_groups() - 1;
  const bool tied = config_.tie_word_embeddings;
  const bool frozen = frozen_base();
  const bool lora = options_.lora.enabled;
  const TensorParallel& tp = options_.tensor_parallel;
  // The groups each pass reads after position i of its order.
  auto forward_ahead = [&](size_t i) {
    return std::span<const size_t>(forward_order_).subspan(i + 1);
  };
  auto backward_ahead = [&](size_t i) {
    return std::span<const size_t>(backward_order_).subspan(i + 1);
  };

  Tensor ids, targets;
  std::vector<BlockSaved> saved;
  Tensor x_final, h_final, rstd_final;
  LinearCrossEntropySaved loss_saved;
  {
    PhaseScope scope(allocator, Phase::kForward);
    ids = b.empty({T}, DType::kI32, Category::kActivation, "batch.tokens");
    if (tp.enabled()) {
      // This rank's rows of the vocabulary: its own tokens' indices there,
      // -1 for the others' (a zero row; the output is summed over the group).
      const int64_t part = config_.vocab_size / tp.size, begin = tp.rank * part;
      std::vector<int32_t> mine(batch.tokens.size());
      for (size_t t = 0; t < mine.size(); ++t)
        mine[t] = batch.tokens[t] >= begin && batch.tokens[t] < begin + part
                      ? static_cast<int32_t>(batch.tokens[t] - begin)
                      : -1;
      b.copy_from_host(mine.data(), ids);
    } else {
      b.copy_from_host(batch.tokens.data(), ids);
    }
    positions_ = b.empty({T}, DType::kI32, Category::kActivation, "batch.positions");
    b.copy_from_host(batch.positions.data(), positions_);
    // A vocabulary-parallel loss makes its own part of the targets.
    if (!tp.enabled()) {
      targets = b.empty({T}, DType::kI32, Category::kActivation, "batch.targets");
      b.copy_from_host(batch.targets.data(), targets);
    }

    Tensor x =
        b.empty({T, C}, dt, is_checkpointed(0) ? Category::kCheckpoint : Category::kActivation,
                "embed.out");
    acquire_params(kEmbed, forward_ahead(0));
    b.embedding_forward(params_.front().views[0], ids, x);
    // Vocabulary-parallel: a partial sum (this rank's rows under sequence
    // parallelism).
    x = sum_rows_over_tensor_group(
        x, is_checkpointed(0) ? Category::kCheckpoint : Category::kActivation, "embed.out");
    release_params(kEmbed);
    if (options_.attention_dense) {
      const int64_t rows =
          options_.rows_are_documents ? static_cast<int64_t>(batch.cu_seqlens.size()) - 1 : 1;
      dense_mask_ = b.dense_attention_mask(batch.cu_seqlens, rows, attention_, dt, "attn.mask");
    }
    for (int64_t l = 0; l < L; ++l) {
      PhaseScope layer(allocator, Phase::kForward, static_cast<int32_t>(l));
      const size_t g = static_cast<size_t>(l + 1);
      acquire_params(g, forward_ahead(g));
      if (lora) acquire_params(adapter_group(l));
      saved.push_back(block_forward(l, x, batch, !is_checkpointed(l)));
      if (lora) release_params(adapter_group(l));
      release_params(g);
      x = saved.back().y;
      saved.back().y = Tensor();
    }
    x_final = x;
    // Only a recomputing block needs the mask again.
    if (options_.checkpoint_interval == 0) dense_mask_ = Tensor();
  }
  {
    PhaseScope scope(allocator, Phase::kLoss);
    // The head's gradients are complete after this phase; a tied table's
    // only after the embedding's backward. A frozen base has none.
    acquire_params(head, forward_ahead(head));
    if (!frozen) acquire_grads(head);
    if (tied) {
      acquire_params(kEmbed);
      if (!frozen) acquire_grads(kEmbed);
    }
    const bool sp = tp.sequence;
    const int64_t R = x_final.size(0);  // this rank's rows under sequence parallelism
    h_final =
        b.empty({R, C}, dt, Category::kActivation, sp ? "final_norm.out.rows" : "final_norm.out");
    rstd_final = b.empty({R}, DType::kF32, Category::kActivation, "final_norm.rstd");
    b.rmsnorm_forward(x_final, params_[head].views[0], eps, h_final, rstd_final);
    // The vocabulary-parallel loss reads every token.
    h_final = whole_sequence(h_final, T, Category::kActivation, "final_norm.out");
    Tensor d_h = b.empty({T, C}, dt, Category::kActivation, "final_norm.out.grad");
    Tensor d_lm_head = lm_head_grad();
    if (tp.enabled()) {
      // Each rank's logits are its (T, V/N) part (vocab_parallel_loss.h).
      VocabParallelSaved parts = vocab_parallel_cross_entropy_forward(
          b, h_final, lm_head(), batch.targets, tp, options_.loss, loss_sum);
      vocab_parallel_cross_entropy_backward(b, h_final, lm_head(), parts, options_.loss, loss_scale,
                                            d_h, d_lm_head);
      // Each part's d_hidden: summed over the group (this rank's rows).
      d_h = sum_rows_over_tensor_group(d_h, Category::kActivation, "final_norm.out.grad");
    } else {
      loss_saved =
          linear_cross_entropy_forward(b, h_final, lm_head(), targets, options_.loss, loss_sum);
      linear_cross_entropy_backward(b, h_final, lm_head(), targets, loss_saved, options_.loss,
                                    loss_scale, d_h, d_lm_head);
      loss_saved = LinearCrossEntropySaved{};
    }
    h_final = Tensor();
    Tensor dx = b.empty({R, C}, dt, Category::kActivation, "final_norm.in.grad");
    Tensor d_final_norm = frozen ? Tensor() : grads_[head].views[0];
    rmsnorm_backward_of_own_heads(d_h, x_final, params_[head].views[0], rstd_final, dx,
                                  d_final_norm, "final_norm.grad", sp);
    x_final = Tensor(), rstd_final = Tensor();
    d_out_ = dx;
    if (tied) release_params(kEmbed);
    if (!frozen) release_grads(head);
    release_params(head);
  }
  {
    PhaseScope scope(allocator, Phase::kBackward);
    Tensor d = d_out_;
    d_out_ = Tensor();
    for (int64_t l = L - 1; l >= 0; --l) {
      PhaseScope layer(allocator, Phase::kBackward, static_cast<int32_t>(l));
      BlockSaved s = std::move(saved[static_cast<size_t>(l)]);
      saved.pop_back();
      const size_t g = static_cast<size_t>(l + 1);
      acquire_params(g, backward_ahead(static_cast<size_t>(L - 1 - l)));
      const size_t trained = lora ? adapter_group(l) : g;
      if (lora) acquire_params(trained);
      acquire_grads(trained);
      if (is_checkpointed(l)) {
        // Rebuild this block's activations from its saved input.
        Tensor input = s.x;
        s = BlockSaved{};
        s = block_forward(l, input, batch, true);
        s.y = Tensor();
      }
      d = block_backward(l, s, d, batch);
      release_grads(trained);
      if (lora) release_params(trained);
      release_params(g);
    }
    if (!frozen) {
      if (!tied) acquire_grads(kEmbed);
      // Every token's gradient, for this rank's rows of the table.
      const Tensor d_all = whole_sequence(d, T, Category::kActivation, "embed.out.grad");
      b.embedding_backward(d_all, ids, grads_.front().views[0]);
      release_grads(kEmbed);
    }
  }
  positions_ = Tensor();
  dense_mask_ = Tensor();
}

}  // namespace headroom
