// The model's weights as Hugging Face safetensors: the tensor names and
// shapes transformers uses, so a file written here opens in PyTorch and a
// checkpoint from the Hub (single file, folder, or sharded with
// model.safetensors.index.json) loads here.
#pragma once

#include <string>

#include "model/transformer.h"

namespace headroom {

// Who writes a save: under ZeRO-3 gathering each group is a collective, so
// every rank calls the save and one of them (the lead) writes.
enum class SaveRole { kWrite, kGatherOnly };

// Writes every parameter of the base model (in the model's dtype; adapters
// are saved by save_adapter) to `path`, atomically. A tied
// head is stored once, as model.embed_tokens.weight, as transformers does.
// Meta models cannot be saved (InternalError): a plan has no values. With
// kGatherOnly, takes part in the gathers and writes nothing (path unused).
void save_weights(Backend& backend, Transformer& model, const std::string& path,
                  SaveRole role = SaveRole::kWrite);

// Loads every base parameter from `path` (file, folder or index.json), converting
// F32 / BF16 / F16 to the model's dtype. A missing tensor, a shape mismatch,
// or an unexpected tensor (one the architecture does not have; a tied
// checkpoint's lm_head.weight is accepted and ignored) is a UsageError naming
// the file and the tensor. On meta only the checks run.
void load_weights(Backend& backend, Transformer& model, const std::string& path);

// The checks of load_weights without a model: run before anything is written
// so a wrong checkpoint costs nothing.
void check_weights(const ModelConfig& config, const std::string& path);

// LoRA adapters in PEFT's layout (save_pretrained / PeftModel.from_pretrained):
// <dir>/adapter_model.safetensors with names like
// base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight (r, in) and
// ...lora_B.weight (out, r), in the model's dtype, and <dir>/adapter_config.json
// (peft_type LORA, r, lora_alpha, lora_dropout, target_modules,
// base_model_name_or_path = `base_model`). With kGatherOnly, only takes part in
// the gathers (ZeRO-3).
void save_adapter(Backend& backend, Transformer& model, const std::string& dir,
                  const std::string& base_model, SaveRole role = SaveRole::kWrite);

// Loads the adapters from `dir` (a folder as above, or the .safetensors file
// itself). An adapter_config.json beside them must agree with the model's
// [lora] (r, lora_alpha, target_modules; no DoRA / rsLoRA); a missing,
// misshapen or unexpected tensor is a UsageError naming the file and tensor.
void load_adapter(Backend& backend, Transformer& model, const std::string& dir);

// The checks of load_adapter without a model, before anything is written.
void check_adapter(const ModelConfig& config, const LoraOptions& lora, const std::string& dir);

// A Hugging Face config.json for `config` (architectures, sizes, rope_theta,
// tie_word_embeddings, torch_dtype), written beside saved weights so the
// folder loads with transformers' from_pretrained.
std::string hf_config_json(const ModelConfig& config, DType dtype);

// Writes <dir>/model.safetensors and <dir>/config.json (creating dir); with
// kGatherOnly, only takes part in the gathers. Each file is replaced whole
// (temporary + rename); a trainer_state.json in `dir` is removed first, so
// a folder being rewritten never passes for a complete checkpoint. A failed
// save (a full disk: UsageError naming the file) removes what it wrote, and
// `dir` if it made it.
void save_checkpoint(Backend& backend, Transformer& model, const std::string& dir,
                     SaveRole role = SaveRole::kWrite);

}  // namespace headroom
