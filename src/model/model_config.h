// The architecture of a decoder-only transformer (Llama / Qwen2 / Qwen3),
// as a preset or imported from a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headroom {

struct ModelConfig {
  std::string name;               // preset name, or the config.json path it came from
  std::string architecture;       // "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"
  int64_t vocab_size = 0;         // V
  int64_t hidden_size = 0;        // C
  int64_t intermediate_size = 0;  // F (SwiGLU)
  int64_t num_layers = 0;         // L
  int64_t num_heads = 0;          // H
  int64_t num_kv_heads = 0;       // KV (GQA: H % KV == 0)
  int64_t head_dim = 0;           // D (Qwen3 sets it independently of C / H)
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool qk_norm = false;              // Qwen3: RMSNorm over head_dim on q and k before RoPE
  bool attention_bias = false;       // Qwen2: bias on q_proj, k_proj, v_proj
  bool tie_word_embeddings = false;  // lm_head shares embed_tokens' weight
  int64_t max_position_embeddings = 0;

  bool operator==(const ModelConfig&) const = default;

  // Parameters, counting a tied head once.
  int64_t num_parameters() const;
};

// The names `model.preset` accepts, in a stable order.
const std::vector<std::string>& model_preset_names();

// A preset at its published shape (values from each model's config.json), or
// a tiny test shape. Throws UsageError naming the key `model.preset`, the bad
// name and the nearest valid one.
ModelConfig model_preset(const std::string& name);

// Imports a Hugging Face config.json (LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM). Throws UsageError "<path>: <field>: ..." for a missing
// or malformed field, an unsupported architecture, or a field whose value
// this engine cannot honour (e.g. rope_scaling, sliding windows, MoE), naming it.
ModelConfig load_hf_config(const std::string& path);

// Checks the shape rules (positive sizes, H % KV == 0, even head_dim) and
// throws UsageError "<source>: <field>: ..." for the first broken one.
void validate_model_config(const ModelConfig& config, const std::string& source);

}  // namespace headroom
