// The rules between keys: values that are each fine alone but contradict each
// other. Each complaint names the other key and its value, so the user sees
// both halves of the contradiction in one line.
#include <string>

#include "config/knobs.h"
#include "config/schema.h"
#include "config/text.h"
#include "memory/device_preset.h"
#include "util/bytes.h"

namespace headroom {

namespace {

using Complaint = std::optional<std::string>;

std::vector<ConfigRule> build_rules() {
  return {
      {"checkpoint.resume", "checkpoint.resume_from",
       "checkpoint.resume = \"auto\" and checkpoint.resume_from exclude each other",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.checkpoint.resume == CheckpointSection::Resume::kAuto &&
             !c.checkpoint.resume_from.empty())
           return "\"auto\" picks the checkpoint itself, but checkpoint.resume_from = " +
                  toml_quote(c.checkpoint.resume_from) + " names one: set only one of them";
         return std::nullopt;
       }},
      {"lora.rank", "lora.enabled", "lora.enabled = true requires lora.rank >= 1",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.lora.enabled && c.lora.rank < 1)
           return "must be >= 1 when lora.enabled = true, got " + std::to_string(c.lora.rank);
         return std::nullopt;
       }},
      {"lora.targets", "lora.enabled",
       "lora.enabled = true requires at least one lora.targets entry",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.lora.enabled && c.lora.targets.empty())
           return std::string("must name at least one module when lora.enabled = true, got []");
         return std::nullopt;
       }},
      {"model.preset", "model.hf_config",
       "exactly one of model.preset and model.hf_config names the architecture",
       [](const ExperimentConfig& c) -> Complaint {
         if (!c.model.preset.empty() && !c.model.hf_config.empty())
           return toml_quote(c.model.preset) +
                  " and model.hf_config = " + toml_quote(c.model.hf_config) +
                  " both name the architecture; set model.preset = \"\" to use model.hf_config";
         if (c.model.preset.empty() && c.model.hf_config.empty())
           return std::string(
               "is \"\" and model.hf_config is \"\" too; one of them must name the architecture");
         return std::nullopt;
       }},
      {"optimizer.master_dtype", "model.dtype",
       "optimizer.master_dtype = \"bf16\" requires model.dtype = \"bf16\"",
       [](const ExperimentConfig& c) -> Complaint {
         // A master copy less precise than the weights it updates would round
         // away the very updates the weights could hold.
         if (c.optimizer.master_dtype == OptimizerSection::Master::kBf16 &&
             c.model.dtype != Precision::kBf16)
           return "\"bf16\" requires model.dtype = \"bf16\", got model.dtype = \"" +
                  std::string(name_of(c.model.dtype)) + "\"";
         return std::nullopt;
       }},
      {"model.quantization", "lora.enabled",
       "model.quantization = \"nf4\" requires lora.enabled = true",
       [](const ExperimentConfig& c) -> Complaint {
         // An NF4 weight cannot be trained (bitsandbytes' Params4bit has no
         // gradient): without adapters nothing would learn.
         if (c.model.quantization == ModelSection::Quantization::kNf4 && !c.lora.enabled)
           return std::string(
               "\"nf4\" freezes the base in 4 bits and trains adapters only, but lora.enabled "
               "= false; set lora.enabled = true (QLoRA) or model.quantization = \"none\"");
         return std::nullopt;
       },
       adapter_sets()},
      {"model.quantization", "zero.stage", "model.quantization = \"nf4\" requires zero.stage <= 2",
       [](const ExperimentConfig& c) -> Complaint {
         // ZeRO-3 would shard the flat groups but not the NF4 storage, which
         // lives beside them: the plan would claim a sharding that does not
         // happen (FSDP-QLoRA's bf16-packed storage is not modelled).
         if (c.model.quantization == ModelSection::Quantization::kNf4 && c.zero.stage > 2)
           return "\"nf4\" keeps the quantized base whole on every rank, but zero.stage = " +
                  std::to_string(c.zero.stage) +
                  " shards parameters; use zero.stage <= 2 (the adapters' states are sharded "
                  "from stage 1)";
         return std::nullopt;
       }},
      {"model.double_quant", "model.quantization",
       "model.double_quant = true requires model.quantization = \"nf4\"",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.model.double_quant && c.model.quantization != ModelSection::Quantization::kNf4)
           return std::string(
               "true quantizes NF4's absmax, but model.quantization = \"none\"; set "
               "model.quantization = \"nf4\" or model.double_quant = false");
         return std::nullopt;
       }},
      {"loss.logits_dtype", "model.dtype", "loss.logits_dtype is \"fp32\" or model.dtype",
       [](const ExperimentConfig& c) -> Complaint {
         // Upcasting is the knob (seed 001's float16_to_fp32); narrowing the
         // logits of an fp32 model, or to another 16-bit type, would only
         // lose precision.
         if (c.loss.logits_dtype != Precision::kFp32 && c.loss.logits_dtype != c.model.dtype)
           return "\"" + std::string(name_of(c.loss.logits_dtype)) +
                  "\" requires model.dtype = \"" + std::string(name_of(c.loss.logits_dtype)) +
                  "\", got model.dtype = \"" + std::string(name_of(c.model.dtype)) + "\"";
         return std::nullopt;
       }},
      {"batch.seq_len", "batch.micro_batch_size",
       "batch.mode = \"padded\": batch.micro_batch_size * batch.seq_len (rounded up to a "
       "multiple of batch.pad_to_multiple_of) <= 2147483647 tokens",
       [](const ExperimentConfig& c) -> Complaint {
         // One micro-batch's token offsets are int32 (cu_seqlens).
         const int64_t m = c.batch.pad_to_multiple_of;
         const int64_t width = m > 0 ? (c.batch.seq_len + m - 1) / m * m : c.batch.seq_len;
         const int64_t tokens = static_cast<int64_t>(c.batch.micro_batch_size) * width;
         if (c.batch.mode == BatchSection::Mode::kPadded && tokens > 2147483647)
           return std::to_string(c.batch.seq_len) +
                  (width != c.batch.seq_len ? " (padded to " + std::to_string(width) + ")" : "") +
                  " with batch.micro_batch_size = " + std::to_string(c.batch.micro_batch_size) +
                  " makes " + std::to_string(tokens) +
                  " tokens per micro-batch, more than 2147483647";
         return std::nullopt;
       }},
      {"batch.micro_batch_size", "batch.mode",
       "batch.mode = \"padded\" without batch.buckets or batch.group_pool requires "
       "batch.micro_batch_size >= 1",
       [](const ExperimentConfig& c) -> Complaint {
         const bool bucketed = !c.batch.buckets.empty() || c.batch.auto_buckets;
         if (c.batch.mode == BatchSection::Mode::kPadded && !bucketed && c.batch.group_pool == 0 &&
             c.batch.micro_batch_size < 1)
           return "must be >= 1 when batch.mode = \"padded\" without batch.buckets, got " +
                  std::to_string(c.batch.micro_batch_size);
         return std::nullopt;
       }},
      {"batch.global_micro_batches", "batch.grad_accum",
       "batch.global_micro_batches > 0 requires batch.grad_accum = 1",
       [](const ExperimentConfig& c) -> Complaint {
         // One of them says how much a step accumulates: the global count
         // derives the per-rank one from the world size.
         if (c.batch.global_micro_batches > 0 && c.batch.grad_accum != 1)
           return std::to_string(c.batch.global_micro_batches) +
                  " sets the micro-batches of a step over all ranks, and batch.grad_accum = " +
                  std::to_string(c.batch.grad_accum) +
                  " sets them per rank; set one of them (batch.grad_accum = 1 or "
                  "batch.global_micro_batches = 0)";
         return std::nullopt;
       }},
      {"batch.group_pool", "batch.mode", "batch.group_pool > 0 requires batch.mode = \"padded\"",
       [](const ExperimentConfig& c) -> Complaint {
         // Packed bins have no padding for grouping to save.
         if (c.batch.group_pool > 0 && c.batch.mode != BatchSection::Mode::kPadded)
           return std::to_string(c.batch.group_pool) +
                  " groups padded rows by length, but batch.mode = \"" +
                  std::string(name_of(c.batch.mode)) +
                  "\"; set batch.mode = \"padded\", or batch.group_pool = 0";
         return std::nullopt;
       }},
      {"batch.group_pool", "batch.buckets", "batch.group_pool > 0 requires batch.buckets = []",
       [](const ExperimentConfig& c) -> Complaint {
         const bool bucketed = !c.batch.buckets.empty() || c.batch.auto_buckets;
         if (c.batch.group_pool > 0 && bucketed)
           return std::to_string(c.batch.group_pool) +
                  " groups lengths by sorting pools, and batch.buckets groups them by "
                  "boundaries; set one of them (batch.group_pool = 0 or batch.buckets = [])";
         return std::nullopt;
       }},
      {"batch.group_pool", "batch.seq_len", "batch.group_pool > 0 requires batch.seq_len = 0",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.batch.group_pool > 0 && c.batch.seq_len > 0)
           return std::to_string(c.batch.group_pool) +
                  " pads rows to the longest of similar lengths, but batch.seq_len = " +
                  std::to_string(c.batch.seq_len) +
                  " pads every row to one length; set one of them (batch.group_pool = 0 or "
                  "batch.seq_len = 0)";
         return std::nullopt;
       }},
      {"batch.buckets", "batch.mode", "batch.buckets requires batch.mode = \"padded\"",
       [](const ExperimentConfig& c) -> Complaint {
         // Packed bins have no padding for buckets to save.
         const bool bucketed = !c.batch.buckets.empty() || c.batch.auto_buckets;
         if (bucketed && c.batch.mode != BatchSection::Mode::kPadded)
           return "buckets padded micro-batches, but batch.mode = \"" +
                  std::string(name_of(c.batch.mode)) +
                  "\"; set batch.mode = \"padded\", or batch.buckets = []";
         return std::nullopt;
       }},
      {"batch.buckets", "batch.seq_len", "batch.buckets requires batch.seq_len = 0",
       [](const ExperimentConfig& c) -> Complaint {
         const bool bucketed = !c.batch.buckets.empty() || c.batch.auto_buckets;
         if (bucketed && c.batch.seq_len > 0)
           return "pads rows to their bucket, but batch.seq_len = " +
                  std::to_string(c.batch.seq_len) +
                  " pads every row to one length; set one of them (batch.seq_len = 0 or "
                  "batch.buckets = [])";
         return std::nullopt;
       }},
      {"attention.window", "attention.mask",
       "attention.mask = \"sliding_window\" requires attention.window >= 1, every other "
       "mask attention.window = 0",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.attention.mask == AttentionSection::Mask::kSlidingWindow && c.attention.window < 1)
           return "must be >= 1 when attention.mask = \"sliding_window\", got " +
                  std::to_string(c.attention.window);
         if (c.attention.mask != AttentionSection::Mask::kSlidingWindow && c.attention.window != 0)
           return std::to_string(c.attention.window) +
                  " is a sliding window's length, but attention.mask = \"" +
                  std::string(name_of(c.attention.mask)) +
                  "\"; set attention.window = 0 or attention.mask = \"sliding_window\"";
         return std::nullopt;
       }},
      {"attention.mask_block", "attention.mask",
       "attention.mask = \"dflash_block\" requires attention.mask_block >= 1, every other "
       "mask attention.mask_block = 0",
       [](const ExperimentConfig& c) -> Complaint {
         // No default block: a silently assumed block length builds a wrong
         // mask that still trains.
         const bool dflash = c.attention.mask == AttentionSection::Mask::kDflashBlock;
         if (dflash && c.attention.mask_block < 1)
           return "must be >= 1 when attention.mask = \"dflash_block\", got " +
                  std::to_string(c.attention.mask_block);
         if (!dflash && c.attention.mask_block != 0)
           return std::to_string(c.attention.mask_block) +
                  " is a dflash block's length, but attention.mask = \"" +
                  std::string(name_of(c.attention.mask)) +
                  "\"; set attention.mask_block = 0 or attention.mask = \"dflash_block\"";
         return std::nullopt;
       }},
      {"attention.mask", "batch.mode",
       "attention.mask = \"causal\" requires batch.mode = \"packed\"",
       [](const ExperimentConfig& c) -> Complaint {
         // Padded rows are separate samples: one causal sequence over the
         // whole micro-batch would let a row attend to the rows before it.
         if (c.attention.mask == AttentionSection::Mask::kCausal &&
             c.batch.mode == BatchSection::Mode::kPadded)
           return std::string(
               "\"causal\" attends across the whole pack, but batch.mode = \"padded\" keeps one "
               "sample per row; use attention.mask = \"document\" (causal within each row)");
         return std::nullopt;
       }},
      {"zero.offload_optimizer",
       "zero.stage",
       "zero.offload_optimizer = true requires zero.stage >= 1",
       [](const ExperimentConfig& c) -> Complaint {
         // Offload moves each rank's optimizer shard to the host; stage 0 has no
         // shards, and DeepSpeed refuses the same combination.
         if (c.zero.offload_optimizer && c.zero.stage < 1)
           return "true requires zero.stage >= 1, got zero.stage = " + std::to_string(c.zero.stage);
         return std::nullopt;
       },
       // At one rank stage 1 shards nothing: it only lets offload happen.
       {"zero.stage=1"}},
      {"parallel.sequence", "parallel.tensor",
       "parallel.sequence = true requires parallel.tensor > 1",
       [](const ExperimentConfig& c) -> Complaint {
         // The sequence is split over a tensor-parallel group; without one
         // there is nothing to split it over.
         if (c.parallel.sequence && c.parallel.tensor < 2)
           return "true splits each tensor-parallel group's tokens, but parallel.tensor = " +
                  std::to_string(c.parallel.tensor);
         return std::nullopt;
       }},
      {"memory.device", "run.backend", "memory.device names a GPU: run.backend != \"cpu\"",
       [](const ExperimentConfig& c) -> Complaint {
         // A cpu run only runs on its host, whose memory no preset describes.
         if (!c.memory.device.empty() && c.run.backend == RunSection::Backend::kCpu)
           return toml_quote(c.memory.device) +
                  " is a GPU, but run.backend = \"cpu\" runs on the host; set run.backend = "
                  "\"cuda\" (or \"meta\" to plan), or memory.device = \"\"";
         return std::nullopt;
       }},
      {"memory.device_capacity", "memory.device",
       "memory.device_capacity <= what memory.device leaves for the allocator at one rank "
       "(0 = all of it)",
       [](const ExperimentConfig& c) -> Complaint {
         // device_capacity keeps its one meaning, the allocator's cap; the
         // preset supplies it when 0 and bounds it otherwise. Checked at one
         // rank: NCCL's lines depend on the world size, known only at run
         // time, where device_budget() checks again.
         if (c.memory.device.empty() || c.memory.device_capacity == 0) return std::nullopt;
         const DevicePreset* preset = find_device_preset(c.memory.device);
         if (!preset) return std::nullopt;  // the key's own check already refused it
         const DeviceBudget budget = budget_for(*preset, {});
         if (c.memory.device_capacity <= budget.allocator_capacity) return std::nullopt;
         return format_bytes_exact(c.memory.device_capacity) + " exceeds the " +
                format_bytes_exact(budget.allocator_capacity) +
                " that memory.device = " + toml_quote(c.memory.device) +
                " leaves for the allocator (usable " + format_bytes(budget.usable_bytes) +
                " less " + format_bytes(budget.outside_bytes) +
                " outside it, at one rank); set memory.device_capacity = 0 to use all of it";
       }},
      {"schedule.warmup_steps", "run.steps", "schedule.warmup_steps <= run.steps",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.schedule.warmup_steps > c.run.steps)
           return "must be <= run.steps = " + std::to_string(c.run.steps) + ", got " +
                  std::to_string(c.schedule.warmup_steps);
         return std::nullopt;
       }},
      {"schedule.min_lr", "optimizer.lr", "schedule.min_lr <= optimizer.lr",
       [](const ExperimentConfig& c) -> Complaint {
         if (c.schedule.min_lr > c.optimizer.lr)
           return "must be <= optimizer.lr = " + toml_float(c.optimizer.lr) + ", got " +
                  toml_float(c.schedule.min_lr);
         return std::nullopt;
       }},
  };
}

}  // namespace

const std::vector<ConfigRule>& config_rules() {
  static const std::vector<ConfigRule> rules = build_rules();
  return rules;
}

std::vector<const ConfigRule*> broken_rules(const ExperimentConfig& config) {
  std::vector<const ConfigRule*> broken;
  for (const ConfigRule& rule : config_rules())
    if (rule.check(config)) broken.push_back(&rule);
  return broken;
}

}  // namespace headroom
