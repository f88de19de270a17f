// Presets at their published shapes, exact parameter counts, Hugging Face
// config.json import (the real files give the presets; every refused field is
// named) and the shape rules.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::TempDir;

// The tensors a Hugging Face checkpoint of `c` holds (docs/model.md), with
// their shapes: an independent way to count parameters.
std::vector<std::pair<std::string, std::vector<int64_t>>> hf_tensors(const ModelConfig& c) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = c.num_heads * D, KV = c.num_kv_heads * D;
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  t.push_back({"model.embed_tokens.weight", {V, C}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {C}});
    t.push_back({p + "self_attn.q_proj.weight", {Q, C}});
    t.push_back({p + "self_attn.k_proj.weight", {KV, C}});
    t.push_back({p + "self_attn.v_proj.weight", {KV, C}});
    if (c.attention_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {Q}});
      t.push_back({p + "self_attn.k_proj.bias", {KV}});
      t.push_back({p + "self_attn.v_proj.bias", {KV}});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {D}});
      t.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    t.push_back({p + "self_attn.o_proj.weight", {C, Q}});
    t.push_back({p + "post_attention_layernorm.weight", {C}});
    t.push_back({p + "mlp.gate_proj.weight", {F, C}});
    t.push_back({p + "mlp.up_proj.weight", {F, C}});
    t.push_back({p + "mlp.down_proj.weight", {C, F}});
  }
  t.push_back({"model.norm.weight", {C}});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, C}});
  return t;
}

// --- presets ------------------------------------------------------------------

TEST(ModelPresets, PublishedModelsHaveTheirPublishedParameterCounts) {
  // Worked by hand from each config.json, e.g. Qwen3-8B:
  //   embed + lm_head  2 * 151936 * 4096                          = 1,244,659,712
  //   per layer        q,o 2*4096*4096 + k,v 2*4096*1024 (41,943,040)
  //                    + q/k norm 2*128 + 2 norms 2*4096 + mlp 3*4096*12288
  //                                                              =   192,946,432
  //   36 layers + final norm 4096                                 = 8,190,735,360
  // matching the totals the model cards publish.
  EXPECT_EQ(model_preset("qwen3-0.6b").num_parameters(), 596'049'920);
  EXPECT_EQ(model_preset("qwen3-1.7b").num_parameters(), 1'720'574'976);
  EXPECT_EQ(model_preset("qwen3-4b").num_parameters(), 4'022'468'096);
  EXPECT_EQ(model_preset("qwen3-8b").num_parameters(), 8'190'735'360);
  EXPECT_EQ(model_preset("qwen2-7b").num_parameters(), 7'615'616'512);
  EXPECT_EQ(model_preset("llama-2-7b").num_parameters(), 6'738'415'616);
  EXPECT_EQ(model_preset("llama-3-8b").num_parameters(), 8'030'261'248);
}

TEST(ModelPresets, TestShapesHaveTheirDocumentedSizes) {
  EXPECT_EQ(model_preset("tiny").num_parameters(), 3'033'856);
  EXPECT_EQ(model_preset("tiny-llama").num_parameters(), 3'164'416);
  EXPECT_EQ(model_preset("tiny-qwen2").num_parameters(), 3'166'464);
  EXPECT_EQ(model_preset("small-50m").num_parameters(), 49'035'264);

  const ModelConfig tiny = model_preset("tiny");
  EXPECT_EQ(tiny.architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(tiny.qk_norm);
  EXPECT_TRUE(tiny.tie_word_embeddings);
  EXPECT_FALSE(tiny.attention_bias);
  EXPECT_EQ(tiny.num_heads / tiny.num_kv_heads, 2);  // exercises GQA
  const ModelConfig llama = model_preset("tiny-llama");
  EXPECT_FALSE(llama.qk_norm);
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.attention_bias);
  EXPECT_TRUE(model_preset("tiny-qwen2").attention_bias);
}

TEST(ModelPresets, CountEqualsTheSumOfTheCheckpointTensors) {
  for (const std::string& name : model_preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig c = model_preset(name);
    int64_t sum = 0;
    for (const auto& [tensor, shape] : hf_tensors(c)) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      sum += n;
    }
    EXPECT_EQ(c.num_parameters(), sum);
  }
}

TEST(ModelPresets, NamesAreStableUniqueAndValid) {
  const std::vector<std::string> expected = {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b",   "qwen3-8b",
                                             "qwen2-7b",   "llama-2-7b", "llama-3-8b", "tiny",
                                             "tiny-llama", "tiny-qwen2", "small-50m"};
  EXPECT_EQ(model_preset_names(), expected);
  for (const std::string& name : model_preset_names()) {
    const ModelConfig c = model_preset(name);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(validate_model_config(c, name)) << name;
  }
}

TEST(ModelPresets, ArchitectureDecidesQkNormAndBias) {
  for (const std::string& name : model_preset_names()) {
    const ModelConfig c = model_preset(name);
    EXPECT_EQ(c.qk_norm, c.architecture == "Qwen3ForCausalLM") << name;
    EXPECT_EQ(c.attention_bias, c.architecture == "Qwen2ForCausalLM") << name;
  }
}

TEST(ModelPresets, UnknownNameSuggestsTheNearestAndListsAll) {
  try {
    model_preset("qwen3-8B");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "model.preset: unknown preset \"qwen3-8B\" (did you mean \"qwen3-8b\"?); expected "
              "one of \"qwen3-0.6b\", \"qwen3-1.7b\", \"qwen3-4b\", \"qwen3-8b\", \"qwen2-7b\", "
              "\"llama-2-7b\", \"llama-3-8b\", \"tiny\", \"tiny-llama\", \"tiny-qwen2\" or "
              "\"small-50m\"");
  }
  try {
    model_preset("gpt2");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

// --- Hugging Face config.json -------------------------------------------------

// The config.json files as published on the Hugging Face Hub, verbatim.

// https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
constexpr const char* kQwen3_8B = R"({
  "architectures": [
    "Qwen3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}
)";

// https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json
constexpr const char* kQwen3_0_6B = R"({
  "architectures": [
    "Qwen3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}
)";

// https://huggingface.co/Qwen/Qwen2-7B/blob/main/config.json
constexpr const char* kQwen2_7B = R"({
  "architectures": [
    "Qwen2ForCausalLM"
  ],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "initializer_range": 0.02,
  "intermediate_size": 18944,
  "max_position_embeddings": 131072,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.37.2",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 152064
}
)";

// https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
constexpr const char* kLlama3_8B = R"({
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
)";

// https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json (no
// rope_theta: transformers' default 10000 applies).
constexpr const char* kLlama2_7B = R"({
  "_name_or_path": "meta-llama/Llama-2-7b-hf",
  "architectures": [
    "LlamaForCausalLM"
  ],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
}
)";

// Loads `json` written to <tmp>/config.json; the path is returned in `path`.
ModelConfig import(const TempDir& dir, const std::string& json, std::string* path = nullptr) {
  const std::string file = dir.file("config.json");
  testing::write_file(file, json);
  if (path) *path = file;
  return load_hf_config(file);
}

// The UsageError message of importing `json`, with the temp path replaced by "config.json".
std::string import_error(const std::string& json) {
  TempDir dir;
  const std::string file = dir.file("config.json");
  testing::write_file(file, json);
  try {
    load_hf_config(file);
  } catch (const UsageError& e) {
    std::string message = e.what();
    if (message.starts_with(file)) message = "config.json" + message.substr(file.size());
    return message;
  }
  return "<imported without error>";
}

TEST(HfConfig, PublishedConfigsGiveThePresets) {
  const std::pair<const char*, const char*> cases[] = {
      {"qwen3-8b", kQwen3_8B},    {"qwen3-0.6b", kQwen3_0_6B}, {"qwen2-7b", kQwen2_7B},
      {"llama-3-8b", kLlama3_8B}, {"llama-2-7b", kLlama2_7B},
  };
  TempDir dir;
  for (const auto& [preset, json] : cases) {
    SCOPED_TRACE(preset);
    std::string path;
    const ModelConfig imported = import(dir, json, &path);
    EXPECT_EQ(imported.name, path);  // names the file it came from
    ModelConfig expected = model_preset(preset);
    expected.name = path;
    EXPECT_EQ(imported, expected);
    EXPECT_EQ(imported.num_parameters(), model_preset(preset).num_parameters());
  }
}

// A minimal valid config of `arch`, with `extra` fields spliced in (which
// override the defaults here, as later JSON keys do).
std::string config_with(const std::string& extra, const std::string& arch = "LlamaForCausalLM") {
  return R"({"architectures": [")" + arch +
         R"("], "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
             "num_hidden_layers": 2, "num_attention_heads": 8)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(HfConfig, DefaultsFollowTransformers) {
  TempDir dir;
  const ModelConfig llama = import(dir, config_with(""));
  EXPECT_EQ(llama.architecture, "LlamaForCausalLM");
  EXPECT_EQ(llama.num_kv_heads, 8);  // = num_attention_heads
  EXPECT_EQ(llama.head_dim, 32);     // = hidden_size / num_attention_heads
  EXPECT_EQ(llama.rope_theta, 10000.0);
  EXPECT_EQ(llama.rms_norm_eps, 1e-6);
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.attention_bias);
  EXPECT_FALSE(llama.qk_norm);
  EXPECT_EQ(llama.max_position_embeddings, 2048);

  // null reads as absent, as transformers treats it.
  EXPECT_EQ(import(dir, config_with(R"("num_key_value_heads": null)")).num_kv_heads, 8);
  EXPECT_TRUE(import(dir, config_with(R"("attention_bias": true)")).attention_bias);

  const ModelConfig qwen2 = import(dir, config_with("", "Qwen2ForCausalLM"));
  EXPECT_TRUE(qwen2.attention_bias);  // hard-coded in Qwen2's attention
  EXPECT_TRUE(
      import(dir, config_with(R"("attention_bias": false)", "Qwen2ForCausalLM")).attention_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_EQ(qwen2.max_position_embeddings, 32768);

  const ModelConfig qwen3 = import(dir, config_with("", "Qwen3ForCausalLM"));
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.attention_bias);
  EXPECT_EQ(qwen3.head_dim, 128);  // Qwen3Config's default, not hidden / heads
  EXPECT_EQ(import(dir, config_with(R"("head_dim": 64)", "Qwen3ForCausalLM")).head_dim, 64);
}

TEST(HfConfig, RopeParametersOfTransformersFive) {
  TempDir dir;
  EXPECT_EQ(import(dir, config_with(R"("rope_parameters": {"rope_type": "default",
                                       "rope_theta": 500000.0})"))
                .rope_theta,
            500000.0);
  EXPECT_EQ(import_error(config_with(R"("rope_parameters": {"rope_type": "yarn", "factor": 4})")),
            "config.json: rope_parameters.factor: expected absent (headroom implements plain "
            "RoPE, without scaling), got integer 4");
  EXPECT_EQ(import_error(config_with(R"("rope_parameters": {"rope_type": "llama3"})")),
            "config.json: rope_parameters.rope_type: expected \"default\" (headroom implements "
            "plain RoPE, without scaling), got string \"llama3\"");
}

TEST(HfConfig, FileAndSyntaxErrors) {
  EXPECT_EQ(import_error("{\"vocab_size\": 1,, }"),
            "config.json: JSON syntax error at byte 18 (line 1, column 18): syntax error while "
            "parsing object key - unexpected ','; expected string literal");
  EXPECT_EQ(import_error("[1, 2]"),
            "config.json: expected a JSON object (a Hugging Face config.json), got array [1,2]");
  try {
    load_hf_config("/nonexistent/config.json");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/config.json: cannot open: No such file or directory");
  }
}

TEST(HfConfig, ArchitectureErrors) {
  const std::string expected =
      "[\"LlamaForCausalLM\", \"Qwen2ForCausalLM\" or \"Qwen3ForCausalLM\"]";
  EXPECT_EQ(
      import_error(R"({"vocab_size": 5})"),
      "config.json: architectures: expected " + expected + ", got nothing (the field is missing)");
  EXPECT_EQ(
      import_error(config_with("", "MistralForCausalLM")),
      "config.json: architectures: expected " + expected + ", got array [\"MistralForCausalLM\"]");
  EXPECT_EQ(
      import_error(R"({"architectures": "LlamaForCausalLM"})"),
      "config.json: architectures: expected " + expected + ", got string \"LlamaForCausalLM\"");
}

TEST(HfConfig, MissingAndMistypedFields) {
  EXPECT_EQ(import_error(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10})"),
            "config.json: hidden_size: expected an integer, got nothing (the field is missing)");
  EXPECT_EQ(import_error(config_with(R"("hidden_size": "4096")")),
            "config.json: hidden_size: expected an integer, got string \"4096\"");
  EXPECT_EQ(import_error(config_with(R"("num_hidden_layers": 2.5)")),
            "config.json: num_hidden_layers: expected an integer, got float 2.5");
  EXPECT_EQ(import_error(config_with(R"("tie_word_embeddings": 1)")),
            "config.json: tie_word_embeddings: expected true or false, got integer 1");
  EXPECT_EQ(import_error(config_with(R"("rope_theta": "1e6")")),
            "config.json: rope_theta: expected a number, got string \"1e6\"");
  EXPECT_EQ(import_error(config_with(R"("hidden_size": 250)")),
            "config.json: head_dim: expected a value, since hidden_size (250) is not a multiple "
            "of num_attention_heads (8), got nothing (the field is missing)");
}

TEST(HfConfig, FieldsWeCannotHonourAreNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})",
       "config.json: rope_scaling: expected null (headroom implements plain RoPE, without "
       "scaling), got object {\"factor\":8.0,\"rope_type\":\"llama3\"}"},
      {R"("use_sliding_window": true)",
       "config.json: use_sliding_window: expected false (headroom has no sliding-window layers), "
       "got true"},
      {R"("layer_types": ["full_attention", "sliding_attention"])",
       "config.json: layer_types[1]: expected \"full_attention\" (headroom has no sliding-window "
       "layers), got string \"sliding_attention\""},
      {R"("mlp_bias": true)",
       "config.json: mlp_bias: expected false (headroom's MLP projections have no bias), got "
       "true"},
      {R"("hidden_act": "gelu")",
       "config.json: hidden_act: expected \"silu\" (SwiGLU), got string \"gelu\""},
      {R"("attention_dropout": 0.1)",
       "config.json: attention_dropout: expected 0 (headroom applies no attention dropout), got "
       "float 0.1"},
      {R"("num_experts": 64)",
       "config.json: num_experts: expected absent (headroom trains dense models, not mixtures "
       "of experts), got integer 64"},
      {R"("num_local_experts": 8)",
       "config.json: num_local_experts: expected absent (headroom trains dense models, not "
       "mixtures of experts), got integer 8"},
      {R"("quantization_config": {"quant_method": "fp8"})",
       "config.json: quantization_config: expected absent (headroom loads unquantized weights), "
       "got object {\"quant_method\":\"fp8\"}"},
  };
  for (const auto& [field, message] : cases)
    EXPECT_EQ(import_error(config_with(field)), message);

  // The values that mean "off" are fine.
  TempDir dir;
  EXPECT_NO_THROW(import(dir, config_with(R"("rope_scaling": null, "use_sliding_window": false,
      "sliding_window": 4096, "mlp_bias": false, "hidden_act": "silu", "attention_dropout": 0,
      "num_experts": 0, "layer_types": ["full_attention", "full_attention"],
      "torch_dtype": "bfloat16", "pretraining_tp": 1)")));
}

TEST(HfConfig, ShapeRulesAreChecked) {
  EXPECT_EQ(import_error(config_with(R"("num_key_value_heads": 3)")),
            "config.json: num_key_value_heads: expected a divisor of num_attention_heads (8), "
            "got 3");
  EXPECT_EQ(import_error(config_with(R"("head_dim": 33)")),
            "config.json: head_dim: expected an even number (RoPE rotates pairs of channels), got "
            "33");
  EXPECT_EQ(import_error(config_with(R"("vocab_size": 0)")),
            "config.json: vocab_size: expected a positive integer, got 0");
  EXPECT_EQ(import_error(config_with(R"("num_attention_heads": -4)")),
            "config.json: num_attention_heads: expected a positive integer, got -4");
  EXPECT_EQ(import_error(config_with(R"("rms_norm_eps": 0)")),
            "config.json: rms_norm_eps: expected a positive number, got 0.0");
  EXPECT_EQ(import_error(config_with(R"("vocab_size": 1125899906842624)")),
            "config.json: this shape has about 5.76e+17 parameters; headroom counts up to 2^53");
}

TEST(ValidateModelConfig, NamesTheSourceAndField) {
  ModelConfig c = model_preset("tiny");
  c.num_kv_heads = 3;
  try {
    validate_model_config(c, "preset tiny");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "preset tiny: num_key_value_heads: expected a divisor of num_attention_heads (4), "
              "got 3");
  }
  c = model_preset("tiny");
  c.architecture = "GPT2LMHeadModel";
  EXPECT_THROW(validate_model_config(c, "x"), UsageError);
  c = model_preset("tiny");
  c.rope_theta = -1;
  EXPECT_THROW(validate_model_config(c, "x"), UsageError);
}

}  // namespace
}  // namespace headroom
