#include "model/weights.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "model/safetensors.h"
#include "util/error.h"

namespace headroom {

void save_weights(Backend& backend, Transformer& model, const std::string& path, SaveRole role) {
  HR_CHECK(backend.kind() != BackendKind::kMeta, "save_weights on a meta model: " + path);
  std::optional<SafetensorsWriter> writer;
  const auto& layouts = model.layouts();
  if (role == SaveRole::kWrite) {
    writer.emplace(
        path, std::map<std::string, std::string>{{"format", "pt"}, {"created_by", "headroom"}});
    for (const GroupLayout& layout : layouts)
      for (const ParamSpec& spec : layout.specs)
        writer->declare(spec.name, model.options().dtype, spec.shape);
  }
  std::vector<char> host;
  for (size_t g = 0; g < layouts.size(); ++g) {
    // Under ZeRO-3 every rank takes part in gathering the group.
    model.acquire_params(g);
    if (writer) {
      for (size_t i = 0; i < layouts[g].specs.size(); ++i) {
        const Tensor& view = model.params()[g].views[i];
        host.resize(view.nbytes());
        backend.copy_to_host(view, host.data());
        writer->write(layouts[g].specs[i].name, host.data());
      }
    }
    model.release_params(g);
  }
  if (writer) writer->finish();
}

namespace {

// Converts `count` values of `from` (raw safetensors bytes) into `to`.
void convert(const std::vector<char>& raw, SafetensorsDType from, DType to, int64_t count,
             std::vector<char>& out) {
  out.resize(static_cast<size_t>(count) * size_of(to));
  auto load = [&](int64_t i) -> float {
    switch (from) {
      case SafetensorsDType::kF32: {
        float v;
        std::memcpy(&v, raw.data() + i * 4, 4);
        return v;
      }
      case SafetensorsDType::kBF16: {
        bf16 v;
        std::memcpy(&v.bits, raw.data() + i * 2, 2);
        return to_float(v);
      }
      case SafetensorsDType::kF16: {
        uint16_t h;
        std::memcpy(&h, raw.data() + i * 2, 2);
        // IEEE half -> float, subnormals and inf/NaN included.
        const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
        uint32_t bits;
        if (exp == 0) {
          float f = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
          std::memcpy(&bits, &f, 4);
          bits |= sign;
        } else if (exp == 31) {
          bits = sign | 0x7f800000u | (mant << 13);
        } else {
          bits = sign | ((exp + 112) << 23) | (mant << 13);
        }
        float v;
        std::memcpy(&v, &bits, 4);
        return v;
      }
      default:
        break;
    }
    throw InternalError("convert: not a floating safetensors dtype");
  };
  for (int64_t i = 0; i < count; ++i) {
    const float v = load(i);
    if (to == DType::kF32) {
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      bf16 b = to_bf16(v);
      std::memcpy(out.data() + i * 2, &b.bits, 2);
    }
  }
}

}  // namespace

namespace {

// Every tensor of `layouts` is in `index` with its shape and a float dtype,
// and `index` holds nothing else. Returns the entry of each spec, in order.
std::vector<const SafetensorsEntry*> match(const SafetensorsIndex& index, const ModelConfig& config,
                                           const std::vector<GroupLayout>& layouts) {
  std::set<std::string> expected;
  for (const GroupLayout& layout : layouts)
    for (const ParamSpec& spec : layout.specs)
      expected.insert(spec.name);
  for (const SafetensorsEntry& entry : index.entries()) {
    if (expected.count(entry.name)) continue;
    if (entry.name == "lm_head.weight" && config.tie_word_embeddings) continue;
    throw UsageError(entry.file + ": " + entry.name + ": not a parameter of " + config.name + " (" +
                     config.architecture + "); is model.weights the checkpoint of this model?");
  }
  std::vector<const SafetensorsEntry*> entries;
  for (const GroupLayout& layout : layouts) {
    for (const ParamSpec& spec : layout.specs) {
      const SafetensorsEntry* entry = index.find(spec.name);
      if (entry == nullptr)
        throw UsageError(index.source() + ": " + spec.name + ": missing (expected shape " +
                         shape_to_string(spec.shape) + ")");
      if (entry->shape != spec.shape)
        throw UsageError(entry->file + ": " + spec.name + ": shape " +
                         shape_to_string(entry->shape) + ", expected " +
                         shape_to_string(spec.shape) + " for " + config.name);
      if (entry->dtype != SafetensorsDType::kF32 && entry->dtype != SafetensorsDType::kBF16 &&
          entry->dtype != SafetensorsDType::kF16)
        throw UsageError(entry->file + ": " + spec.name + ": dtype " +
                         std::string(safetensors_name(entry->dtype)) +
                         ", expected F32, BF16 or F16");
      entries.push_back(entry);
    }
  }
  return entries;
}

}  // namespace

void check_weights(const ModelConfig& config, const std::string& path) {
  match(SafetensorsIndex::open(path), config, transformer_layouts(config));
}

std::string hf_config_json(const ModelConfig& c, DType dtype) {
  nlohmann::ordered_json j;
  j["architectures"] = {c.architecture};
  j["model_type"] = c.architecture == "LlamaForCausalLM"   ? "llama"
                    : c.architecture == "Qwen2ForCausalLM" ? "qwen2"
                                                           : "qwen3";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : "float32";
  return j.dump(2) + "\n";
}

void save_checkpoint(Backend& backend, Transformer& model, const std::string& dir, SaveRole role) {
  if (role == SaveRole::kGatherOnly) {
    save_weights(backend, model, "", role);
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError(dir + ": cannot create checkpoint folder: " + ec.message());
  save_weights(backend, model, dir + "/model.safetensors", role);
  const std::string json = hf_config_json(model.config(), model.options().dtype);
  const std::string tmp = dir + "/config.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
    if (!out.flush()) throw UsageError(tmp + ": write failed");
  }
  std::filesystem::rename(tmp, dir + "/config.json");
}

void load_weights(Backend& backend, Transformer& model, const std::string& path) {
  SafetensorsIndex index = SafetensorsIndex::open(path);
  const auto& layouts = model.layouts();
  const std::vector<const SafetensorsEntry*> entries = match(index, model.config(), layouts);
  const bool meta = backend.kind() == BackendKind::kMeta;
  std::vector<char> raw, converted;
  size_t k = 0;
  for (size_t g = 0; g < layouts.size(); ++g) {
    // Every tensor of the group is overwritten; under ZeRO-3 each rank then
    // keeps its shard. On meta only that (the allocations) happens.
    model.begin_params_write(g);
    for (size_t i = 0; i < layouts[g].specs.size(); ++i) {
      const SafetensorsEntry* entry = entries[k++];
      if (meta) continue;
      Tensor& view = model.params()[g].views[i];
      raw.resize(entry->nbytes);
      index.read_raw(*entry, raw.data());
      convert(raw, entry->dtype, view.dtype(), view.numel(), converted);
      backend.copy_from_host(converted.data(), view);
    }
    model.end_params_write(g);
  }
}

}  // namespace headroom
