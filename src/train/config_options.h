// The config-to-options mapping, in one place: what each key of the
// experiment config (config/schema.cc) becomes in the layers that use it.
//
// Every key of the schema reaches a field of RunSettings, or is refused here
// with the key named when its value is one this build cannot run: a run that
// silently ignored a key would plan the wrong memory.
// tests/train/config_options_test.cc holds that true key by key, so a key
// added to the schema without a mapping fails the suite.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "backend/target_device.h"
#include "config/config.h"
#include "data/batcher.h"
#include "data/markov.h"
#include "data/token_dataset.h"
#include "memory/allocator.h"
#include "memory/device_preset.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "parallel/zero.h"
#include "tensor/tensor.h"
#include "train/optimizer.h"
#include "train/run_mode.h"
#include "train/trainer.h"

namespace headroom {

// model.dtype and loss.logits_dtype as the tensor dtype they store.
DType dtype_of(Precision precision);

// Everything a run takes from its config, as the layers below want it. Each
// field names the keys it comes from.
// How a job's ranks divide the work (parallel.tensor): rank r is rank
// r % tensor of tensor-parallel group r / tensor, and rank r / tensor of the
// data-parallel group of the ranks with the same r % tensor.
struct ParallelLayout {
  int tensor = 1;  // parallel.tensor
  int data = 1;    // world / tensor
  int tensor_rank = 0;
  int data_rank = 0;
};

// Throws UsageError naming parallel.tensor when it does not divide the
// world or the model's heads, kv heads and intermediate size.
ParallelLayout parallel_layout_of(const ExperimentConfig& config, const ModelConfig& model,
                                  int world_size, int rank);

struct RunSettings {
  RunMode mode = RunMode::kTrain;

  // [run]
  std::string name;               // run.name (recorded in the trace)
  std::filesystem::path run_dir;  // run.out_dir / run.name
  int64_t steps = 0;              // run.steps
  // run.backend; always meta in a plan (promise 1: the same code path).
  BackendKind backend = BackendKind::kCpu;
  // run.backend: the device whose allocations meta makes (a cuda run's plan
  // is the same on every host); kHostCpu for a cpu run.
  TargetDevice target = TargetDevice::kHostCpu;

  // [model]
  ModelConfig model;       // model.preset, or the file model.hf_config
  std::string weights;     // model.weights; "" = random initialization
  uint64_t init_seed = 0;  // model.seed
  // model.dtype, [lora], [attention], [loss], checkpoint.activations and
  // run.seed (the per-step randomness).
  TransformerOptions transformer;

  // [data], [batch]
  std::string data_path;  // data.path
  // [batch], data.max_sample_tokens, data.shuffle, data.seed, for this rank;
  // pad_id is 0 here: the run takes the dataset's eos_id (batch_options_of).
  BatchOptions batch;
  bool synthesize_if_missing = false;  // data.synthesize_if_missing
  MarkovSpec synthetic_source;         // over the model's vocabulary, seeded by data.seed
  LengthSpec synthetic_lengths;        // data.synthetic_lengths
  int64_t synthetic_documents = 0;     // data.synthetic_documents

  // [memory]: with memory.device, allocator.capacity is what the preset
  // leaves after the memory outside the allocator (device_budget), capped by
  // memory.device_capacity when that is set too.
  AllocatorOptions allocator;
  std::optional<DeviceBudget> device;  // memory.device, at this run's world size
  // The cuda target's cuBLASLt workspace: the preset's architecture's, or
  // Hopper's when no preset says (backend/target_device.h).
  uint64_t cublaslt_workspace_bytes = kCublasLtWorkspaceBytes;
  ParallelLayout layout;           // parallel.tensor at this job's world size
  ZeroOptions zero;                // zero.stage, zero.prefetch
  bool offload_optimizer = false;  // zero.offload_optimizer

  // [checkpoint]
  std::filesystem::path checkpoint_dir;  // checkpoint.dir, or <run_dir>/checkpoints
  int64_t save_every = 0;                // checkpoint.save_every
  bool save_initial = false;             // checkpoint.save_initial
  bool save_sharded = false;             // checkpoint.format = "sharded"
  std::string resume_from;               // checkpoint.resume_from; "" in a plan
  bool resume_auto = false;              // checkpoint.resume = "auto"; false in a plan
  // run.collective_timeout in seconds: how long one collective may take
  // before the rank aborts the job; 0 = forever.
  int64_t collective_timeout_seconds = 0;

  // [optimizer], [schedule]
  TrainerOptions trainer;           // the schedule (and run.steps), optimizer.grad_clip
  AdamWConfig adamw;                // optimizer.kind, betas, eps, weight_decay, master_dtype
  int64_t max_nonfinite_steps = 0;  // optimizer.max_nonfinite_steps

  // [trace]
  bool memory_events = true;  // trace.memory_events
  int64_t flush_every = 1;    // trace.flush_every
};

// The settings of rank `rank` of `world_size` running `config` in `mode`.
// Reads the file model.hf_config names. Throws UsageError naming the key for
// what this build cannot run: checkpoint.format = "sharded" with
// lora.enabled, `train` of run.backend = "cuda", and a
// data.synthetic_lengths that does not parse.
RunSettings run_settings_of(const ExperimentConfig& config, RunMode mode, int world_size = 1,
                            int rank = 0);

// Every field of `settings`, one "name = value" line each: two settings are
// the same exactly when their texts are (the key-by-key test compares them).
std::string to_text(const RunSettings& settings);

// model.preset, or the Hugging Face config.json model.hf_config names.
ModelConfig model_config_of(const ExperimentConfig& config);

// [lora] as the model takes it (targets by their HF module names).
LoraOptions lora_options_of(const ExperimentConfig& config);

// The micro-batches each of `data_parallel_ranks` ranks accumulates per
// step: batch.global_micro_batches / data_parallel_ranks when that is set,
// else batch.grad_accum. Throws UsageError naming the key when the ranks do
// not divide the global count.
int grad_accum_of(const ExperimentConfig& config, int data_parallel_ranks);

// [batch] and [data] for `rank` of `world_size` data-parallel ranks, padding
// with `pad_id`: one function, so `train`, `plan` and `headroom data
// batches` batch alike.
BatchOptions batch_options_of(const ExperimentConfig& config, int world_size, int rank,
                              int32_t pad_id);
// As above, padding with pad_id_of(dataset).
BatchOptions batch_options_of(const ExperimentConfig& config, const TokenDataset& dataset,
                              int world_size, int rank);
// The dataset's eos_id when it has one, else 0: padding is never a target,
// so its id only has to be a token of the vocabulary.
int32_t pad_id_of(const TokenDataset& dataset);

// adapter_config.json's base_model_name_or_path: the weights the adapters
// were trained on (model.weights, made absolute), or the architecture
// (model.hf_config or model.preset) when the base came from model.seed.
std::string base_model_name(const ExperimentConfig& config);

}  // namespace headroom
