#include "model/weights.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "model/safetensors.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_error.h"
#include "util/parse_json.h"

namespace headroom {

namespace {

// Writes layouts[first, last) of `model` to `path` (see save_weights).
void save_groups(Backend& backend, Transformer& model, size_t first, size_t last,
                 const std::string& path, SaveRole role) {
  HR_CHECK(backend.kind() != BackendKind::kMeta, "saving a meta model: " + path);
  std::optional<SafetensorsWriter> writer;
  const auto& layouts = model.layouts();
  for (size_t g = first; g < last; ++g)
    for (const ParamSpec& spec : layouts[g].specs)
      if (spec.quantized)
        throw UsageError(path + ": " + spec.name +
                         " is stored in NF4 (model.quantization = \"nf4\"); headroom saves "
                         "dense weights only: save the adapters, or merge them into the dense "
                         "base (export --merge loads it unquantized)");
  if (role == SaveRole::kWrite) {
    writer.emplace(
        path, std::map<std::string, std::string>{{"format", "pt"}, {"created_by", "headroom"}});
    for (size_t g = first; g < last; ++g)
      for (size_t i = 0; i < layouts[g].specs.size(); ++i)
        writer->declare(layouts[g].specs[i].name, model.options().dtype, model.whole_shape(g, i));
  }
  std::vector<char> host;
  for (size_t g = first; g < last; ++g) {
    // Under ZeRO-3 every rank takes part in gathering the group.
    model.acquire_params(g);
    for (size_t i = 0; i < layouts[g].specs.size(); ++i) {
      // parallel.tensor: every rank of the group takes part in gathering a
      // split tensor whole; the file holds what a run of one rank writes.
      if (model.splits_over_tensor_group(g, i)) {
        model.gather_whole(g, i, host);
      } else if (writer) {
        const Tensor& view = model.params()[g].views[i];
        host.resize(view.nbytes());
        backend.copy_to_host(view, host.data());
      }
      if (writer) writer->write(layouts[g].specs[i].name, host.data());
    }
    model.release_params(g);
  }
  if (writer) writer->finish();
}

}  // namespace

void save_weights(Backend& backend, Transformer& model, const std::string& path, SaveRole role) {
  save_groups(backend, model, 0, model.num_base_groups(), path, role);
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
        f16 v;
        std::memcpy(&v.bits, raw.data() + i * 2, 2);
        return to_float(v);  // subnormals and inf/NaN included
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
    } else if (to == DType::kF16) {
      f16 h = to_f16(v);
      std::memcpy(out.data() + i * 2, &h.bits, 2);
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
// `layouts[first, last)` are the groups the file holds (the base model's, or
// the adapters'); `what` names the file's role in an error.
std::vector<const SafetensorsEntry*> match(const SafetensorsIndex& index, const ModelConfig& config,
                                           const std::vector<GroupLayout>& layouts, size_t first,
                                           size_t last, const char* what) {
  std::set<std::string> expected;
  for (size_t g = first; g < last; ++g)
    for (const ParamSpec& spec : layouts[g].specs)
      expected.insert(spec.name);
  for (const SafetensorsEntry& entry : index.entries()) {
    if (expected.count(entry.name)) continue;
    if (entry.name == "lm_head.weight" && config.tie_word_embeddings) continue;
    throw UsageError(entry.file + ": " + entry.name + ": not a parameter of " + config.name + " (" +
                     config.architecture + "); is " + what + " of this model?");
  }
  std::vector<const SafetensorsEntry*> entries;
  for (size_t g = first; g < last; ++g) {
    for (const ParamSpec& spec : layouts[g].specs) {
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
  const std::vector<GroupLayout> layouts = transformer_layouts(config);
  match(SafetensorsIndex::open(path), config, layouts, 0, layouts.size(),
        "model.weights the checkpoint");
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
  j["torch_dtype"] = dtype == DType::kBF16  ? "bfloat16"
                     : dtype == DType::kF16 ? "float16"
                                            : "float32";
  return j.dump(2) + "\n";
}

namespace {

// Makes `dir` (a checkpoint or export folder) ready for a save, and tells
// whether it made it. A trainer_state.json already there (an earlier run's
// checkpoint being rewritten) goes first: the trainer writes it last to mark
// a folder complete (train/train_state.h), and it must not vouch for a folder
// whose weights are being replaced.
bool prepare_folder(const std::string& dir, const char* kind) {
  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError(dir + ": cannot create " + kind + " folder: " + ec.message());
  const std::string marker = dir + "/trainer_state.json";
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT)
    throw_file_error(marker, "cannot remove the previous checkpoint's marker", errno);
  return created;
}

// After a failed save: removes the files this save put in place and the
// folder when this save created it, so no half of a save is left looking
// like a checkpoint. Best effort: the error being thrown says what failed.
void undo_save(const std::string& dir, bool created_folder,
               const std::vector<std::string>& placed) {
  std::error_code ignored;
  for (const std::string& file : placed)
    std::filesystem::remove(file, ignored);
  if (created_folder) std::filesystem::remove(dir, ignored);  // only if empty
}

}  // namespace

void save_checkpoint(Backend& backend, Transformer& model, const std::string& dir, SaveRole role) {
  if (role == SaveRole::kGatherOnly) {
    save_weights(backend, model, "", role);
    return;
  }
  const bool created = prepare_folder(dir, "checkpoint");
  std::vector<std::string> placed;
  try {
    // The weights file replaces an earlier one only when it is whole
    // (SafetensorsWriter renames its temporary at the end), so a save that
    // fails there leaves an earlier export's pair intact.
    save_weights(backend, model, dir + "/model.safetensors", role);
    placed.push_back(dir + "/model.safetensors");
    const std::string json = hf_config_json(model.config(), model.options().dtype);
    write_file_atomically(dir + "/config.json", json);
  } catch (...) {
    undo_save(dir, created, placed);
    throw;
  }
}

namespace {

// Loads layouts[first, last) of `model` from `index` (matched by match()).
void load_groups(Backend& backend, Transformer& model, const SafetensorsIndex& index,
                 const std::vector<const SafetensorsEntry*>& entries, size_t first, size_t last) {
  const auto& layouts = model.layouts();
  const bool meta = backend.kind() == BackendKind::kMeta;
  std::vector<char> raw, converted;
  size_t k = 0;
  for (size_t g = first; g < last; ++g) {
    // Every tensor of the group is overwritten; under ZeRO-3 each rank then
    // keeps its shard. On meta only that (the allocations) happens.
    model.begin_params_write(g);
    for (size_t i = 0; i < layouts[g].specs.size(); ++i) {
      const SafetensorsEntry* entry = entries[k++];
      const ParamSpec& spec = layouts[g].specs[i];
      if (spec.quantized) {
        // As bitsandbytes' Params4bit: the dense weight goes to the device
        // in the model's dtype, is quantized there, and the staging is freed.
        Tensor staging = backend.empty(spec.shape, model.options().dtype, Category::kWorkspace,
                                       layouts[g].name + ".staging");
        if (!meta) {
          raw.resize(entry->nbytes);
          index.read_raw(*entry, raw.data());
          convert(raw, entry->dtype, staging.dtype(), staging.numel(), converted);
          backend.copy_from_host(converted.data(), staging);
        }
        model.quantize_param(g, i, staging);
        continue;
      }
      if (meta) continue;
      Tensor& view = model.params()[g].views[i];
      raw.resize(entry->nbytes);
      index.read_raw(*entry, raw.data());
      // parallel.tensor: the file holds the whole tensor; this rank keeps
      // its rows or columns.
      const bool split = model.splits_over_tensor_group(g, i);
      convert(raw, entry->dtype, view.dtype(),
              split ? numel_of(model.whole_shape(g, i)) : view.numel(), converted);
      if (split)
        model.write_part(g, i, converted.data());
      else
        backend.copy_from_host(converted.data(), view);
    }
    model.end_params_write(g);
  }
}

std::string adapter_file(const std::string& dir) {
  return std::filesystem::is_directory(dir) ? dir + "/adapter_model.safetensors" : dir;
}

std::string adapter_config_file(const std::string& dir) {
  const std::filesystem::path path(dir);
  return std::filesystem::is_directory(path)
             ? (path / "adapter_config.json").string()
             : (path.parent_path() / "adapter_config.json").string();
}

// adapter_config.json, when present, must describe the adapters this model
// has: the same r, alpha and targets, and no PEFT variant headroom does not
// implement.
void check_adapter_config(const LoraOptions& lora, const std::string& dir) {
  const std::string path = adapter_config_file(dir);
  std::ifstream in(path);
  if (!in) return;
  nlohmann::json j = parse_json_document(in, path);
  auto differs = [&](const char* key, const std::string& expected) {
    throw UsageError(path + ": " + key + " is " + (j.contains(key) ? j[key].dump() : "missing") +
                     ", this run's [lora] needs " + expected);
  };
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() != lora.rank)
    differs("r", std::to_string(lora.rank) + " (lora.rank)");
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number() ||
      std::abs(j["lora_alpha"].get<double>() - lora.alpha) > 1e-6)
    differs("lora_alpha", std::to_string(lora.alpha) + " (lora.alpha)");
  std::set<std::string> targets, expected;
  if (j.contains("target_modules") && j["target_modules"].is_array())
    for (const auto& t : j["target_modules"])
      if (t.is_string()) targets.insert(t.get<std::string>());
  std::string listed;
  for (LoraTarget t : lora.targets) {
    expected.insert(lora_target_name(t));
    listed += std::string(listed.empty() ? "" : ", ") + lora_target_name(t);
  }
  if (targets != expected) differs("target_modules", "[" + listed + "] (lora.targets)");
  for (const char* key : {"use_dora", "use_rslora"})
    if (j.contains(key) && j[key].is_boolean() && j[key].get<bool>())
      differs(key, "false (headroom trains plain LoRA)");
}

}  // namespace

void load_weights(Backend& backend, Transformer& model, const std::string& path) {
  SafetensorsIndex index = SafetensorsIndex::open(path);
  // Matched against the whole model's shapes (a tensor-parallel rank's
  // layouts hold its parts), in the same order.
  const std::vector<const SafetensorsEntry*> entries =
      match(index, model.config(),
            transformer_layouts(model.config(), model.options().lora, model.options().nf4), 0,
            model.num_base_groups(), "model.weights the checkpoint");
  load_groups(backend, model, index, entries, 0, model.num_base_groups());
}

void check_adapter(const ModelConfig& config, const LoraOptions& lora, const std::string& dir) {
  check_adapter_config(lora, dir);
  const std::vector<GroupLayout> layouts = transformer_layouts(config, lora);
  const size_t base = static_cast<size_t>(config.num_layers) + 2;
  match(SafetensorsIndex::open(adapter_file(dir)), config, layouts, base, layouts.size(),
        "the adapter the one");
}

void load_adapter(Backend& backend, Transformer& model, const std::string& dir) {
  HR_CHECK(model.frozen_base(), "load_adapter on a model without LoRA");
  check_adapter_config(model.options().lora, dir);
  SafetensorsIndex index = SafetensorsIndex::open(adapter_file(dir));
  // The whole model's shapes, as load_weights matches them.
  const std::vector<const SafetensorsEntry*> entries =
      match(index, model.config(),
            transformer_layouts(model.config(), model.options().lora, model.options().nf4),
            model.num_base_groups(), model.layouts().size(), "the adapter the one");
  load_groups(backend, model, index, entries, model.num_base_groups(), model.layouts().size());
}

namespace {

std::string adapter_config_json(const Transformer& model, const std::string& base_model) {
  // PEFT's LoraConfig, as save_pretrained writes it, so PeftModel loads it.
  const LoraOptions& lora = model.options().lora;
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = base_model;
  j["r"] = lora.rank;
  // The config's values, not their float rounding (0.1, not 0.10000000149).
  j["lora_alpha"] = std::round(static_cast<double>(lora.alpha) * 1e6) / 1e6;
  j["lora_dropout"] = std::round(static_cast<double>(lora.dropout) * 1e6) / 1e6;
  std::vector<std::string> targets;
  for (LoraTarget t : lora.targets)
    targets.push_back(lora_target_name(t));
  j["target_modules"] = targets;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  if (lora.gaussian_init)
    j["init_lora_weights"] = "gaussian";
  else
    j["init_lora_weights"] = true;
  j["modules_to_save"] = nullptr;
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["rank_pattern"] = nlohmann::ordered_json::object();
  j["alpha_pattern"] = nlohmann::ordered_json::object();
  j["created_by"] = "headroom";
  return j.dump(2) + "\n";
}

}  // namespace

void save_adapter(Backend& backend, Transformer& model, const std::string& dir,
                  const std::string& base_model, SaveRole role) {
  HR_CHECK(model.frozen_base(), "save_adapter on a model without LoRA");
  if (role != SaveRole::kWrite) {
    save_groups(backend, model, model.num_base_groups(), model.layouts().size(), "", role);
    return;
  }
  const bool created = prepare_folder(dir, "adapter");
  const std::string weights = dir + "/adapter_model.safetensors";
  try {
    save_groups(backend, model, model.num_base_groups(), model.layouts().size(), weights, role);
    write_file_atomically(dir + "/adapter_config.json", adapter_config_json(model, base_model));
  } catch (...) {
    undo_save(dir, created, {weights});
    throw;
  }
}

}  // namespace headroom
