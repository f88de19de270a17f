#include "train/merge_adapters.h"

#include <filesystem>
#include <memory>

#include "backend/backend.h"
#include "memory/segment_source.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "train/config_options.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

MergedModel merge_adapters(const ExperimentConfig& config, const std::string& adapter,
                           const std::string& out, bool overwrite) {
  if (!config.lora.enabled)
    throw UsageError(
        "lora.enabled = false: export --merge folds LoRA adapters into their base; set the "
        "[lora] the adapters were trained with (their shapes come from it)");
  const ModelConfig model_config = model_config_of(config);
  const LoraOptions lora = lora_options_of(config);
  check_adapter(model_config, lora, adapter);
  if (!config.model.weights.empty()) check_weights(model_config, config.model.weights);
  const fs::path target = fs::path(out) / "model.safetensors";
  if (fs::exists(target) && !overwrite)
    throw UsageError(target.string() + ": exists; pass --overwrite to replace it");

  Allocator allocator(make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  std::unique_ptr<Backend> backend =
      make_backend(BackendKind::kCpu, TargetDevice::kHostCpu, allocator);
  // The dense base, also for adapters trained on an NF4 one (QLoRA): merging
  // into 4-bit codes would round every merged weight again, so the merged
  // model is the base at full precision plus the adapters, as PEFT's
  // merge_and_unload on a reloaded bf16 base gives.
  TransformerOptions model_options;
  model_options.dtype = dtype_of(config.model.dtype);
  model_options.lora = lora;
  Transformer model(*backend, model_config, model_options);
  model.init_random(static_cast<uint64_t>(config.model.seed));
  if (!config.model.weights.empty()) load_weights(*backend, model, config.model.weights);
  load_adapter(*backend, model, adapter);
  model.merge_adapters();
  save_checkpoint(*backend, model, out);

  MergedModel merged;
  merged.adapter_groups = model.layouts().size() - model.num_base_groups();
  merged.rank = lora.rank;
  merged.alpha = lora.alpha;
  merged.targets = lora.targets.size();
  merged.model_name = model_config.name;
  merged.dtype = model_options.dtype;
  merged.bytes =
      static_cast<uint64_t>(model_config.num_parameters()) * size_of(model_options.dtype);
  merged.base = base_model_name(config);
  merged.weights_path = target.string();
  return merged;
}

}  // namespace headroom
