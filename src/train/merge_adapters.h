// `headroom export --merge`: a LoRA run's adapters folded into its base, as
// a Hugging Face model folder that transformers' from_pretrained loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "tensor/dtype.h"

namespace headroom {

// What was merged and written, for the caller to report.
struct MergedModel {
  size_t adapter_groups = 0;  // parameter groups of adapters folded in
  int64_t rank = 0;           // lora.rank
  float alpha = 0;            // lora.alpha
  size_t targets = 0;         // projections adapted per block
  std::string model_name;     // the architecture's name
  DType dtype = DType::kF32;  // of the written weights (model.dtype)
  uint64_t bytes = 0;         // of the written weights
  std::string base;           // base_model_name(): the weights, or the architecture
  std::string weights_path;   // <out>/model.safetensors
};

// Builds the experiment's model on the cpu (its base from model.weights, or
// model.seed as training did), loads the LoRA adapters from `adapter` (a
// checkpoint or PEFT folder), folds them into the base (W += alpha/r B A)
// and writes `out`/model.safetensors (in model.dtype) and config.json.
// Every input is checked first, and nothing is written when a check fails
// (UsageError naming it): [lora] must be enabled (the adapters' shapes come
// from it), and `out` must not hold a model.safetensors unless `overwrite`.
MergedModel merge_adapters(const ExperimentConfig& config, const std::string& adapter,
                           const std::string& out, bool overwrite);

}  // namespace headroom
