#include "model/layouts.h"

#include "util/error.h"

namespace headroom {

namespace {

std::string layer_name(int64_t l) {
  return "model.layers." + std::to_string(l) + ".";
}

// PEFT's module path of a target inside a layer.
std::string module_of(LoraTarget t) {
  return std::string(t <= kLoraO ? "self_attn." : "mlp.") + lora_target_name(t);
}

}  // namespace

BlockParam weight_of(LoraTarget projection) {
  static const BlockParam kWeights[kNumLoraTargets] = {kWq, kWk, kWv, kWo, kWGate, kWUp, kWDown};
  return kWeights[projection];
}

std::pair<int64_t, int64_t> projection_shape(const ModelConfig& c, LoraTarget t,
                                             int tensor_parallel) {
  const int64_t N = tensor_parallel, C = c.hidden_size, F = c.intermediate_size / N;
  const int64_t HD = c.num_heads / N * c.head_dim, KVD = c.num_kv_heads / N * c.head_dim;
  switch (t) {
    case kLoraQ:
      return {HD, C};
    case kLoraK:
    case kLoraV:
      return {KVD, C};
    case kLoraO:
      return {C, HD};
    case kLoraGate:
    case kLoraUp:
      return {F, C};
    case kLoraDown:
      return {C, F};
    default:
      break;
  }
  throw InternalError("unknown projection");
}

const char* projection_tag(LoraTarget t) {
  static const char* const kTags[kNumLoraTargets] = {"attn.q",   "attn.k", "attn.v",  "attn.o_proj",
                                                     "mlp.gate", "mlp.up", "mlp.down"};
  return kTags[t];
}

std::vector<GroupLayout> transformer_layouts(const ModelConfig& c, const LoraOptions& lora,
                                             bool nf4, int tensor_parallel) {
  const int64_t N = tensor_parallel, C = c.hidden_size, V = c.vocab_size;
  const int64_t HD = c.num_heads / N * c.head_dim, KVD = c.num_kv_heads / N * c.head_dim;
  std::vector<GroupLayout> layouts;
  // Vocabulary-parallel: a rank's part of the embedding and of the head.
  const int64_t VP = V / N;
  layouts.push_back(GroupLayout::make("embed", {{"model.embed_tokens.weight", {VP, C}}}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = layer_name(l);
    auto projection = [&](LoraTarget t) {
      const auto [out, in] = projection_shape(c, t, tensor_parallel);
      return ParamSpec{p + module_of(t) + ".weight", {out, in}, nf4};
    };
    std::vector<ParamSpec> specs = {
        {p + "input_layernorm.weight", {C}},
        projection(kLoraQ),
        projection(kLoraK),
        projection(kLoraV),
        projection(kLoraO),
        {p + "post_attention_layernorm.weight", {C}},
        projection(kLoraGate),
        projection(kLoraUp),
        projection(kLoraDown),
    };
    if (c.attention_bias) {
      specs.push_back({p + "self_attn.q_proj.bias", {HD}});
      specs.push_back({p + "self_attn.k_proj.bias", {KVD}});
      specs.push_back({p + "self_attn.v_proj.bias", {KVD}});
    }
    if (c.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    layouts.push_back(GroupLayout::make("block." + std::to_string(l), std::move(specs)));
  }
  std::vector<ParamSpec> head = {{"model.norm.weight", {C}}};
  if (!c.tie_word_embeddings) head.push_back({"lm_head.weight", {VP, C}});
  layouts.push_back(GroupLayout::make("head", std::move(head)));
  if (!lora.enabled) return layouts;

  for (GroupLayout& layout : layouts)
    layout.trainable = false;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::vector<ParamSpec> specs;
    const std::string p = "base_model.model." + layer_name(l);
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraTarget target = static_cast<LoraTarget>(t);
      if (!lora.targets_contain(target)) continue;
      const auto [out, in] = projection_shape(c, target, tensor_parallel);
      specs.push_back({p + module_of(target) + ".lora_A.weight", {lora.rank, in}});
      specs.push_back({p + module_of(target) + ".lora_B.weight", {out, lora.rank}});
    }
    layouts.push_back(GroupLayout::make("lora." + std::to_string(l), std::move(specs)));
  }
  return layouts;
}

}  // namespace headroom
