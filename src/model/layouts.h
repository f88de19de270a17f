// Where a decoder's parameters live: the flat groups (param_group.h) with
// their Hugging Face and PEFT names, and the indices the model reads them by.
//
// Groups in order: "embed" (the token table), "block.<l>" for each layer,
// "head" (final norm and, when untied, lm_head); with LoRA the base groups
// are frozen and "lora.<l>" follow, holding A (r, in) and B (out, r) per
// target projection under PEFT's names. With NF4 (QLoRA) the seven block
// projections are marked `quantized`: their storage is the model's own
// (Nf4Weight), not the group's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/lora.h"
#include "model/model_config.h"
#include "model/param_group.h"

namespace headroom {

// Indices of a block group's views, in the order of the layout.
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

// The block weight of each projection LoRA can adapt (and NF4 stores).
BlockParam weight_of(LoraTarget projection);
// (out, in) of a projection's weight; with `tensor_parallel` N > 1 one
// rank's part of it (tensor_parallel.h: out / N rows of a column-parallel
// projection, in / N columns of a row-parallel one).
std::pair<int64_t, int64_t> projection_shape(const ModelConfig& config, LoraTarget projection,
                                             int tensor_parallel = 1);
// "attn.q", "mlp.down": the tag of a projection's output within its block.
const char* projection_tag(LoraTarget projection);

// The layouts of a model's groups (embed, blocks, head), with HF names; with
// LoRA those are frozen and the adapter groups follow; with `nf4` the block
// projections are quantized specs; with `tensor_parallel` N > 1 the blocks
// hold one rank's part of each projection and bias (the names stay Hugging
// Face's, the shapes are the part's).
std::vector<GroupLayout> transformer_layouts(const ModelConfig& config,
                                             const LoraOptions& lora = {}, bool nf4 = false,
                                             int tensor_parallel = 1);

}  // namespace headroom
