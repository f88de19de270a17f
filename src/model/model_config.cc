#include "model/model_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "config/text.h"
#include "util/error.h"
#include "util/json_error.h"

namespace headroom {

namespace {

constexpr std::string_view kLlama = "LlamaForCausalLM";
constexpr std::string_view kQwen2 = "Qwen2ForCausalLM";
constexpr std::string_view kQwen3 = "Qwen3ForCausalLM";

ModelConfig make(std::string name, std::string_view architecture, int64_t vocab, int64_t hidden,
                 int64_t intermediate, int64_t layers, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, double rope_theta, double eps, bool tied,
                 int64_t max_positions) {
  ModelConfig c;
  c.name = std::move(name);
  c.architecture = std::string(architecture);
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.rope_theta = rope_theta;
  c.rms_norm_eps = eps;
  // The architecture decides the per-layer extras, as in transformers.
  c.qk_norm = architecture == kQwen3;
  c.attention_bias = architecture == kQwen2;
  c.tie_word_embeddings = tied;
  c.max_position_embeddings = max_positions;
  return c;
}

// The published shapes are copied from each model's config.json on the
// Hugging Face Hub (huggingface.co/<repo>/blob/main/config.json):
//   Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-4B, Qwen/Qwen3-8B (transformers 4.51.0),
//   Qwen/Qwen2-7B, meta-llama/Llama-2-7b-hf, meta-llama/Meta-Llama-3-8B.
// tests/model/model_config_test.cc imports five of those config.json texts
// (Qwen3-0.6B, Qwen3-8B, Qwen2-7B, both Llamas) and checks they give exactly
// these structs; it also checks each total against the published count.
std::vector<ModelConfig> build_presets() {
  std::vector<ModelConfig> p;
  // Published models (architecture decides qk_norm and bias: see make()).
  // clang-format off
  //               name          arch    V       C     F      L   H   KV  D    theta eps   tied   max_pos
  p.push_back(make("qwen3-0.6b", kQwen3, 151936, 1024, 3072,  28, 16, 8,  128, 1e6, 1e-6, true,  40960));
  p.push_back(make("qwen3-1.7b", kQwen3, 151936, 2048, 6144,  28, 16, 8,  128, 1e6, 1e-6, true,  40960));
  p.push_back(make("qwen3-4b",   kQwen3, 151936, 2560, 9728,  36, 32, 8,  128, 1e6, 1e-6, true,  40960));
  p.push_back(make("qwen3-8b",   kQwen3, 151936, 4096, 12288, 36, 32, 8,  128, 1e6, 1e-6, false, 40960));
  p.push_back(make("qwen2-7b",   kQwen2, 152064, 3584, 18944, 28, 28, 4,  128, 1e6, 1e-6, false, 131072));
  p.push_back(make("llama-2-7b", kLlama, 32000,  4096, 11008, 32, 32, 32, 128, 1e4, 1e-5, false, 4096));
  p.push_back(make("llama-3-8b", kLlama, 128256, 4096, 14336, 32, 32, 8,  128, 5e5, 1e-5, false, 8192));
  // clang-format on

  // Test shapes. "tiny" is the quickstart model (3,033,856 parameters): big
  // enough to exercise GQA (2 query heads per kv head), qk-norm and tying,
  // small enough that a cpu step takes milliseconds. "tiny-llama" and
  // "tiny-qwen2" swap in the other architectures' parts (untied head, q/k/v
  // bias) so every weight kind has a small model. "small-50m" (49,035,264
  // parameters) is a cpu model that learns something in minutes.
  // clang-format off
  //               name          arch    V     C    F     L   H  KV D   theta eps   tied   max_pos
  p.push_back(make("tiny",       kQwen3, 512,  256, 688,  4,  4, 2, 64, 1e4, 1e-6, true,  2048));
  p.push_back(make("tiny-llama", kLlama, 512,  256, 688,  4,  4, 2, 64, 1e4, 1e-5, false, 2048));
  p.push_back(make("tiny-qwen2", kQwen2, 512,  256, 688,  4,  4, 2, 64, 1e4, 1e-6, false, 2048));
  p.push_back(make("small-50m",  kQwen3, 8192, 512, 1920, 12, 8, 4, 64, 1e4, 1e-6, true,  4096));
  // clang-format on
  return p;
}

const std::vector<ModelConfig>& presets() {
  static const std::vector<ModelConfig> all = build_presets();
  return all;
}

const std::vector<std::string_view>& architectures() {
  static const std::vector<std::string_view> all = {kLlama, kQwen2, kQwen3};
  return all;
}

// --- Hugging Face config.json -------------------------------------------------

// How a JSON value reads in "got ...": its kind and a short rendering.
std::string describe(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "boolean " + text;
    case nlohmann::json::value_t::string:
      return "string " + text;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer " + text;
    case nlohmann::json::value_t::number_float:
      return "float " + text;
    case nlohmann::json::value_t::array:
      return "array " + text;
    case nlohmann::json::value_t::object:
      return "object " + text;
    default:
      return text;
  }
}

// Typed access to the top-level fields of one config.json, each failure an
// error "<path>: <field>: expected ..., got ...". A field set to null reads
// as absent, as transformers treats it.
class HfFields {
 public:
  HfFields(std::string path, const nlohmann::json& root) : path_(std::move(path)), root_(root) {}

  const nlohmann::json* find(const std::string& key) const {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& got) const {
    throw UsageError(path_ + ": " + key + ": expected " + expected + ", got " + got);
  }

  int64_t integer(const std::string& key) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) fail(key, "an integer", "nothing (the field is missing)");
    return as_integer(key, *value);
  }

  int64_t integer_or(const std::string& key, int64_t fallback) const {
    const nlohmann::json* value = find(key);
    return value == nullptr ? fallback : as_integer(key, *value);
  }

  double number_or(const std::string& key, double fallback) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) fail(key, "a number", describe(*value));
    return value->get<double>();
  }

  bool boolean_or(const std::string& key, bool fallback) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail(key, "true or false", describe(*value));
    return value->get<bool>();
  }

  std::string string_or(const std::string& key, const std::string& fallback) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) fail(key, "a string", describe(*value));
    return value->get<std::string>();
  }

 private:
  int64_t as_integer(const std::string& key, const nlohmann::json& value) const {
    if (value.is_number_unsigned()) {
      if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        fail(key, "an integer below 2^63", describe(value));
      return static_cast<int64_t>(value.get<uint64_t>());
    }
    if (!value.is_number_integer()) fail(key, "an integer", describe(value));
    return value.get<int64_t>();
  }

  std::string path_;
  const nlohmann::json& root_;
};

std::string read_text_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  // An ifstream opens a directory; the read is what fails.
  if (file.bad() || (file.fail() && !file.eof()))
    throw UsageError(path + ": cannot read: " + std::strerror(errno));
  return text.str();
}

// Fields whose presence means a model this engine does not build: each is
// named in the error rather than silently ignored.
void refuse_unsupported(const HfFields& f) {
  if (const nlohmann::json* v = f.find("rope_scaling"))
    f.fail("rope_scaling", "null (headroom implements plain RoPE, without scaling)", describe(*v));
  if (f.boolean_or("use_sliding_window", false))
    f.fail("use_sliding_window", "false (headroom has no sliding-window layers)", "true");
  if (const nlohmann::json* v = f.find("layer_types")) {
    if (!v->is_array()) f.fail("layer_types", "an array of strings", describe(*v));
    for (size_t i = 0; i < v->size(); ++i) {
      const nlohmann::json& t = (*v)[i];
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        f.fail("layer_types[" + std::to_string(i) + "]",
               "\"full_attention\" (headroom has no sliding-window layers)", describe(t));
    }
  }
  if (f.boolean_or("mlp_bias", false))
    f.fail("mlp_bias", "false (headroom's MLP projections have no bias)", "true");
  const std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu") f.fail("hidden_act", "\"silu\" (SwiGLU)", describe(nlohmann::json(act)));
  if (const double dropout = f.number_or("attention_dropout", 0.0); dropout != 0.0)
    f.fail("attention_dropout", "0 (headroom applies no attention dropout)",
           describe(*f.find("attention_dropout")));
  if (const nlohmann::json* v = f.find("quantization_config"))
    f.fail("quantization_config", "absent (headroom loads unquantized weights)", describe(*v));
  // Mixture-of-experts fields, under the names transformers' MoE configs use.
  for (const char* key :
       {"num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size"}) {
    const nlohmann::json* v = f.find(key);
    if (v != nullptr && !(v->is_number() && v->get<double>() == 0.0))
      f.fail(key, "absent (headroom trains dense models, not mixtures of experts)", describe(*v));
  }
}

// transformers >= 5 writes RoPE as "rope_parameters": {"rope_type", "rope_theta"}
// instead of a top-level rope_theta; plain RoPE is all this engine honours.
double read_rope_theta(const HfFields& f) {
  double theta = f.number_or("rope_theta", 10000.0);
  const nlohmann::json* params = f.find("rope_parameters");
  if (params == nullptr) return theta;
  if (!params->is_object()) f.fail("rope_parameters", "an object", describe(*params));
  for (const auto& [key, value] : params->items()) {
    const std::string field = "rope_parameters." + key;
    if (key == "rope_type") {
      if (value != "default")
        f.fail(field, "\"default\" (headroom implements plain RoPE, without scaling)",
               describe(value));
    } else if (key == "rope_theta") {
      if (!value.is_number()) f.fail(field, "a number", describe(value));
      theta = value.get<double>();
    } else {
      f.fail(field, "absent (headroom implements plain RoPE, without scaling)", describe(value));
    }
  }
  return theta;
}

}  // namespace

int64_t ModelConfig::num_parameters() const {
  const int64_t q_width = num_heads * head_dim;
  const int64_t kv_width = num_kv_heads * head_dim;
  int64_t per_layer = hidden_size * q_width         // q_proj
                      + 2 * hidden_size * kv_width  // k_proj, v_proj
                      + q_width * hidden_size       // o_proj
                      + 2 * hidden_size             // input_layernorm, post_attention_layernorm
                      + 3 * hidden_size * intermediate_size;  // gate_proj, up_proj, down_proj
  if (attention_bias) per_layer += q_width + 2 * kv_width;
  // q_norm, k_norm: one weight of head_dim each, shared by all heads.
  if (qk_norm) per_layer += 2 * head_dim;
  const int64_t embedding = vocab_size * hidden_size;
  return embedding + num_layers * per_layer + hidden_size /* final norm */ +
         (tie_word_embeddings ? 0 : embedding /* lm_head */);
}

const std::vector<std::string>& model_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ModelConfig& c : presets())
      out.push_back(c.name);
    return out;
  }();
  return names;
}

ModelConfig model_preset(const std::string& name) {
  for (const ModelConfig& c : presets())
    if (c.name == name) return c;
  std::vector<std::string_view> names(model_preset_names().begin(), model_preset_names().end());
  const std::optional<std::string> near = nearest_word(name, names);
  throw UsageError("model.preset: unknown preset " + toml_quote(name) +
                   (near ? " (did you mean " + toml_quote(*near) + "?)" : "") +
                   "; expected one of " + quoted_choices(names));
}

ModelConfig load_hf_config(const std::string& path) {
  const std::string text = read_text_file(path);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw_json_syntax_error(path, error.what(), error.byte);
  } catch (const nlohmann::json::out_of_range& error) {
    throw_json_number_error(path, error.what());
  }
  if (!root.is_object())
    throw UsageError(path + ": expected a JSON object (a Hugging Face config.json), got " +
                     describe(root));
  const HfFields f(path, root);

  const std::string choices = quoted_choices(architectures());
  const nlohmann::json* arch = f.find("architectures");
  if (arch == nullptr)
    f.fail("architectures", "[" + choices + "]", "nothing (the field is missing)");
  if (!arch->is_array() || arch->empty() || !(*arch)[0].is_string() ||
      std::find(architectures().begin(), architectures().end(), (*arch)[0].get<std::string>()) ==
          architectures().end())
    f.fail("architectures", "[" + choices + "]", describe(*arch));

  ModelConfig c;
  c.name = path;
  c.architecture = (*arch)[0].get<std::string>();
  refuse_unsupported(f);

  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer_or("num_key_value_heads", c.num_heads);

  // Qwen3Config defaults head_dim to 128 (transformers' Qwen3Config); Llama and
  // Qwen2 derive it from the hidden size.
  if (c.architecture == kQwen3) {
    c.head_dim = f.integer_or("head_dim", 128);
  } else if (f.find("head_dim") != nullptr) {
    c.head_dim = f.integer("head_dim");
  } else if (c.num_heads > 0) {  // otherwise validation names num_attention_heads
    if (c.hidden_size % c.num_heads != 0)
      f.fail("head_dim",
             "a value, since hidden_size (" + std::to_string(c.hidden_size) +
                 ") is not a multiple of num_attention_heads (" + std::to_string(c.num_heads) + ")",
             "nothing (the field is missing)");
    c.head_dim = c.hidden_size / c.num_heads;
  }

  c.rope_theta = read_rope_theta(f);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);  // transformers' default for all three
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  // transformers' defaults: 2048 for Llama, 32768 for Qwen2 / Qwen3.
  c.max_position_embeddings =
      f.integer_or("max_position_embeddings", c.architecture == kLlama ? 2048 : 32768);

  // Qwen2's attention hard-codes bias on q/k/v (transformers ignores an
  // attention_bias field there); Llama and Qwen3 read the flag.
  c.attention_bias = c.architecture == kQwen2 ? true : f.boolean_or("attention_bias", false);
  c.qk_norm = c.architecture == kQwen3;

  validate_model_config(c, path);
  return c;
}

void validate_model_config(const ModelConfig& c, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& expected, const std::string& got) {
    throw UsageError(source + ": " + field + ": expected " + expected + ", got " + got);
  };
  if (std::find(architectures().begin(), architectures().end(), c.architecture) ==
      architectures().end())
    fail("architectures", quoted_choices(architectures()), toml_quote(c.architecture));
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
  };
  for (const auto& [field, value] : sizes)
    if (value <= 0) fail(field, "a positive integer", std::to_string(value));
  if (c.num_heads % c.num_kv_heads != 0)
    fail("num_key_value_heads",
         "a divisor of num_attention_heads (" + std::to_string(c.num_heads) + ")",
         std::to_string(c.num_kv_heads));
  if (c.head_dim % 2 != 0)
    fail("head_dim", "an even number (RoPE rotates pairs of channels)", std::to_string(c.head_dim));
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 0))
    fail("rope_theta", "a positive number", toml_float(c.rope_theta));
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0))
    fail("rms_norm_eps", "a positive number", toml_float(c.rms_norm_eps));

  // num_parameters() counts in int64; bound the count in floating point (which
  // cannot overflow here) so that no product in it can.
  const double V = static_cast<double>(c.vocab_size), C = static_cast<double>(c.hidden_size),
               F = static_cast<double>(c.intermediate_size), L = static_cast<double>(c.num_layers),
               H = static_cast<double>(c.num_heads), KV = static_cast<double>(c.num_kv_heads),
               D = static_cast<double>(c.head_dim);
  const double bound =
      2 * V * C + C + L * ((2 * H + 2 * KV) * D * C + 3 * C * F + (H + 2 * KV + 2) * D + 2 * C);
  if (bound > 0x1p53) {
    std::ostringstream count;
    count.precision(3);
    count << bound;
    throw UsageError(source + ": this shape has about " + count.str() +
                     " parameters; headroom counts up to 2^53");
  }
}

}  // namespace headroom
