#include "train/config_options.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "data/length_spec.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

DType dtype_of(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return DType::kBF16;
    case Precision::kFp16:
      return DType::kF16;
    case Precision::kFp32:
      break;
  }
  return DType::kF32;
}

namespace {

// Values this build parses and validates but cannot run yet.
void refuse_unbuilt_features(const ExperimentConfig& c) {
  auto refuse = [](const std::string& what, const std::string& when) {
    throw UsageError(what + ": not supported yet (" + when + ")");
  };
  if (c.checkpoint.format == CheckpointSection::Format::kSharded && c.lora.enabled)
    refuse("checkpoint.format = \"sharded\" with lora.enabled = true",
           "a LoRA run saves only its adapters, in PEFT's layout; use \"consolidated\"");
  if (c.parallel.tensor > 1) {
    const std::string tp = "parallel.tensor = " + std::to_string(c.parallel.tensor);
    if (c.model.quantization == ModelSection::Quantization::kNf4)
      refuse(tp + " with model.quantization = \"nf4\"",
             "the NF4 base would be quantized per part; use a dense base");
    // Dropout on a row-parallel projection's input part would draw another
    // mask than one rank draws on the whole input.
    const auto& targets = c.lora.targets;
    const bool row_parallel_target =
        std::find(targets.begin(), targets.end(), "o_proj") != targets.end() ||
        std::find(targets.begin(), targets.end(), "down_proj") != targets.end();
    if (c.lora.enabled && c.lora.dropout > 0 && row_parallel_target)
      refuse(tp + " with lora.dropout > 0 on o_proj or down_proj",
             "the dropout mask of a split input is not the whole input's; use lora.dropout = 0 "
             "or adapt q/k/v/gate/up only");
  }
}

BackendKind backend_of(const ExperimentConfig& config, RunMode mode) {
  if (mode == RunMode::kPlan) return BackendKind::kMeta;
  switch (config.run.backend) {
    case RunSection::Backend::kCpu:
      return BackendKind::kCpu;
    case RunSection::Backend::kMeta:
      return BackendKind::kMeta;
    case RunSection::Backend::kCuda:
      // Whether this build and machine can run it is Run's first check
      // (require_cuda_run), before it writes anything.
      return BackendKind::kCuda;
  }
  throw InternalError("unknown run.backend");
}

AttentionMaskKind attention_mask_of(AttentionSection::Mask mask) {
  switch (mask) {
    case AttentionSection::Mask::kCausal:
      return AttentionMaskKind::kCausal;
    case AttentionSection::Mask::kSlidingWindow:
      return AttentionMaskKind::kSlidingWindow;
    case AttentionSection::Mask::kDflashBlock:
      return AttentionMaskKind::kDflashBlock;
    case AttentionSection::Mask::kDocument:
      break;
  }
  return AttentionMaskKind::kDocument;
}

TransformerOptions transformer_options_of(const ExperimentConfig& config) {
  TransformerOptions o;
  o.dtype = dtype_of(config.model.dtype);
  o.attention_block_size = config.attention.block_size;
  o.attention_mask = attention_mask_of(config.attention.mask);
  // The rules (config/rules.cc) already hold each parameter to its kind.
  o.attention_window = config.attention.window;
  o.attention_mask_block = config.attention.mask_block;
  o.attention_dense = config.attention.backend == AttentionSection::Backend::kDenseAdditive;
  o.rows_are_documents = config.batch.mode == BatchSection::Mode::kPadded;
  o.checkpoint_interval = config.checkpoint.activations;
  o.loss.chunk_size = config.loss.chunk_size;
  o.loss.save_softmax = config.loss.mode == LossSection::Mode::kSave;
  o.loss.logits_dtype = dtype_of(config.loss.logits_dtype);
  o.lora = lora_options_of(config);
  o.nf4 = config.model.quantization == ModelSection::Quantization::kNf4;
  o.nf4_double_quant = config.model.double_quant;
  o.step_seed = static_cast<uint64_t>(config.run.seed);
  return o;
}

TrainerOptions trainer_options_of(const ExperimentConfig& config) {
  TrainerOptions o;
  o.schedule.lr = config.optimizer.lr;
  o.schedule.min_lr = config.schedule.min_lr;
  o.schedule.warmup_steps = config.schedule.warmup_steps;
  o.schedule.total_steps = config.run.steps;
  switch (config.schedule.decay) {
    case ScheduleSection::Decay::kCosine:
      o.schedule.decay = Decay::kCosine;
      break;
    case ScheduleSection::Decay::kLinear:
      o.schedule.decay = Decay::kLinear;
      break;
    case ScheduleSection::Decay::kConstant:
      o.schedule.decay = Decay::kConstant;
      break;
  }
  o.grad_clip = static_cast<float>(config.optimizer.grad_clip);
  // optimizer.loss_scale: 0 is "dynamic", GradScaler's initial scale.
  o.dynamic_loss_scale = config.optimizer.loss_scale == 0;
  o.loss_scale = o.dynamic_loss_scale ? 65536.0 : config.optimizer.loss_scale;
  return o;
}

AdamWConfig adamw_config_of(const ExperimentConfig& config) {
  AdamWConfig o;
  o.beta1 = static_cast<float>(config.optimizer.betas[0]);
  o.beta2 = static_cast<float>(config.optimizer.betas[1]);
  o.eps = static_cast<float>(config.optimizer.eps);
  o.weight_decay = static_cast<float>(config.optimizer.weight_decay);
  switch (config.optimizer.master_dtype) {
    case OptimizerSection::Master::kFp32:
      o.master = MasterWeights::kFp32;
      break;
    case OptimizerSection::Master::kBf16:
      o.master = MasterWeights::kBf16;
      break;
    case OptimizerSection::Master::kNone:
      o.master = MasterWeights::kNone;
      break;
  }
  o.eight_bit = config.optimizer.kind == OptimizerSection::Kind::kAdamw8bit;
  return o;
}

AllocatorOptions allocator_options_of(const ExperimentConfig& config) {
  AllocatorOptions o;
  o.capacity = config.memory.device_capacity;
  o.policy = config.memory.allocator == MemorySection::Allocator::kExact
                 ? AllocatorPolicy::kExact
                 : AllocatorPolicy::kCaching;
  return o;
}

// The synthetic corpus of data.synthesize_if_missing: an order-1 source
// over the model's vocabulary (docs/data-format.md).
MarkovSpec synthetic_source_of(const ExperimentConfig& config, const ModelConfig& model) {
  MarkovSpec spec;
  spec.vocab_size = model.vocab_size;
  spec.order = 1;
  spec.branching = 8;
  spec.seed = static_cast<uint64_t>(config.data.seed);
  return spec;
}

}  // namespace

ModelConfig model_config_of(const ExperimentConfig& config) {
  return config.model.hf_config.empty() ? model_preset(config.model.preset)
                                        : load_hf_config(config.model.hf_config);
}

LoraOptions lora_options_of(const ExperimentConfig& config) {
  LoraOptions lora;
  lora.enabled = config.lora.enabled;
  lora.rank = config.lora.rank;
  lora.alpha = static_cast<float>(config.lora.alpha);
  lora.dropout = static_cast<float>(config.lora.dropout);
  lora.targets.clear();
  for (const std::string& name : config.lora.targets)
    for (int t = 0; t < kNumLoraTargets; ++t)
      if (name == lora_target_name(static_cast<LoraTarget>(t)))
        lora.targets.push_back(static_cast<LoraTarget>(t));
  lora.seed = static_cast<uint64_t>(config.lora.seed);
  lora.gaussian_init = config.lora.init == LoraSection::Init::kGaussian;
  return lora;
}

int grad_accum_of(const ExperimentConfig& config, int data_parallel_ranks) {
  const int64_t global = config.batch.global_micro_batches;
  if (global == 0) return config.batch.grad_accum;
  if (data_parallel_ranks < 1 || global % data_parallel_ranks != 0) {
    std::string ranks = std::to_string(data_parallel_ranks) + " data-parallel ranks";
    if (config.parallel.tensor > 1)
      ranks += " (" + std::to_string(data_parallel_ranks * config.parallel.tensor) +
               " ranks in tensor-parallel groups of parallel.tensor = " +
               std::to_string(config.parallel.tensor) + ")";
    throw UsageError("batch.global_micro_batches = " + std::to_string(global) +
                     " is not a multiple of the job's " + ranks +
                     ": every rank accumulates the same number of micro-batches a step; "
                     "choose a multiple of every world size the run may be requeued on");
  }
  const int64_t per_rank = global / data_parallel_ranks;
  if (per_rank > std::numeric_limits<int>::max())
    throw UsageError("batch.global_micro_batches = " + std::to_string(global) + " makes " +
                     std::to_string(per_rank) + " micro-batches per rank, more than " +
                     std::to_string(std::numeric_limits<int>::max()));
  return static_cast<int>(per_rank);
}

BatchOptions batch_options_of(const ExperimentConfig& config, int world_size, int rank,
                              int32_t pad_id) {
  BatchOptions o;
  o.mode = config.batch.mode == BatchSection::Mode::kPadded ? BatchOptions::Mode::kPadded
                                                            : BatchOptions::Mode::kPacked;
  switch (config.batch.packing) {
    case BatchSection::Packing::kFirstFit:
      o.packing = BatchOptions::Packing::kFirstFit;
      break;
    case BatchSection::Packing::kFirstFitDecreasing:
      o.packing = BatchOptions::Packing::kFirstFitDecreasing;
      break;
    case BatchSection::Packing::kNextFit:
      o.packing = BatchOptions::Packing::kNextFit;
      break;
  }
  o.packing_window = config.batch.packing_window;
  o.max_tokens_per_micro_batch = config.batch.max_tokens_per_micro_batch;
  o.pad_to_multiple_of = config.batch.pad_to_multiple_of;
  o.micro_batch_size = config.batch.micro_batch_size;
  o.seq_len = config.batch.seq_len;
  o.buckets = config.batch.buckets;
  o.auto_buckets = config.batch.auto_buckets;
  o.group_pool = config.batch.group_pool;
  o.pad_to = config.batch.pad_to == BatchSection::PadTo::kLongest ? BatchOptions::PadTo::kLongest
                                                                  : BatchOptions::PadTo::kBucket;
  o.pad_id = pad_id;
  o.grad_accum = grad_accum_of(config, world_size);
  o.max_sample_tokens = config.data.max_sample_tokens;
  o.shuffle = config.data.shuffle;
  o.seed = static_cast<uint64_t>(config.data.seed);
  o.world_size = world_size;
  o.rank = rank;
  return o;
}

BatchOptions batch_options_of(const ExperimentConfig& config, const TokenDataset& dataset,
                              int world_size, int rank) {
  return batch_options_of(config, world_size, rank, pad_id_of(dataset));
}

int32_t pad_id_of(const TokenDataset& dataset) {
  return static_cast<int32_t>(std::max<int64_t>(dataset.attributes().eos_id, 0));
}

std::string base_model_name(const ExperimentConfig& config) {
  if (!config.model.weights.empty()) return fs::absolute(config.model.weights).string();
  return config.model.hf_config.empty() ? config.model.preset : config.model.hf_config;
}

ParallelLayout parallel_layout_of(const ExperimentConfig& config, const ModelConfig& model,
                                  int world_size, int rank) {
  ParallelLayout layout;
  layout.tensor = config.parallel.tensor;
  if (world_size % layout.tensor != 0)
    throw UsageError("parallel.tensor = " + std::to_string(layout.tensor) +
                     " does not divide the job's " + std::to_string(world_size) +
                     " ranks (the ranks are tensor-parallel groups of parallel.tensor "
                     "consecutive ranks)");
  if (const std::string problem = tensor_parallel_problem(model, layout.tensor); !problem.empty())
    throw UsageError("parallel.tensor: " + problem);
  layout.data = world_size / layout.tensor;
  layout.tensor_rank = rank % layout.tensor;
  layout.data_rank = rank / layout.tensor;
  return layout;
}

RunSettings run_settings_of(const ExperimentConfig& config, RunMode mode, int world_size,
                            int rank) {
  refuse_unbuilt_features(config);
  RunSettings s;
  s.mode = mode;
  s.name = config.run.name;
  s.run_dir = fs::path(config.run.out_dir) / config.run.name;
  s.steps = config.run.steps;
  s.backend = backend_of(config, mode);
  s.target = config.run.backend == RunSection::Backend::kCuda ? TargetDevice::kCuda
                                                              : TargetDevice::kHostCpu;

  s.model = model_config_of(config);
  s.weights = config.model.weights;
  s.init_seed = static_cast<uint64_t>(config.model.seed);
  s.transformer = transformer_options_of(config);
  s.layout = parallel_layout_of(config, s.model, world_size, rank);
  // The group's communicator is the Run's to make (Run::execute).
  s.transformer.tensor_parallel.rank = s.layout.tensor_rank;
  s.transformer.tensor_parallel.size = s.layout.tensor;
  s.transformer.tensor_parallel.sequence = config.parallel.sequence;

  s.data_path = config.data.path;
  // The ranks of one tensor-parallel group train on the same micro-batches:
  // the data is dealt over the data-parallel ranks.
  s.batch = batch_options_of(config, s.layout.data, s.layout.data_rank, 0);
  s.synthesize_if_missing = config.data.synthesize_if_missing;
  s.synthetic_source = synthetic_source_of(config, s.model);
  s.synthetic_lengths =
      parse_length_spec(config.data.synthetic_lengths, "data.synthetic_lengths =");
  s.synthetic_documents = config.data.synthetic_documents;

  s.allocator = allocator_options_of(config);
  BudgetOptions budget;
  budget.world_size = world_size;
  // A rank of a tensor-parallel job holds the group's communicator and the
  // data-parallel one (NCCL's buffers per communicator; each is counted as
  // spanning the job, an upper bound).
  if (s.layout.tensor > 1) budget.nccl_communicators = s.layout.data > 1 ? 2 : 1;
  budget.capacity_cap = config.memory.device_capacity;
  s.device = device_budget(config.memory.device, budget);
  if (s.device) {
    s.allocator.capacity = s.device->allocator_capacity;
    s.cublaslt_workspace_bytes = s.device->cublaslt_workspace_bytes;
  }
  s.zero.stage = config.zero.stage;
  s.zero.prefetch = config.zero.prefetch;
  s.offload_optimizer = config.zero.offload_optimizer;

  s.checkpoint_dir =
      config.checkpoint.dir.empty() ? s.run_dir / "checkpoints" : fs::path(config.checkpoint.dir);
  s.save_every = config.checkpoint.save_every;
  s.save_initial = config.checkpoint.save_initial;
  s.save_sharded = config.checkpoint.format == CheckpointSection::Format::kSharded;
  // A plan makes the allocations of a fresh run: it reads no checkpoint.
  if (mode == RunMode::kTrain) {
    s.resume_from = config.checkpoint.resume_from;
    s.resume_auto = config.checkpoint.resume == CheckpointSection::Resume::kAuto;
  }
  s.collective_timeout_seconds = config.run.collective_timeout;

  s.trainer = trainer_options_of(config);
  s.adamw = adamw_config_of(config);
  s.max_nonfinite_steps = config.optimizer.max_nonfinite_steps;

  s.memory_events = config.trace.memory_events;
  s.flush_every = config.trace.flush_every;
  return s;
}

std::string to_text(const RunSettings& s) {
  std::ostringstream out;
  out.precision(17);
  auto line = [&out](const char* name, const auto& value) {
    out << name << " = " << value << "\n";
  };
  line("mode", s.mode == RunMode::kPlan ? "plan" : "train");
  line("name", s.name);
  line("run_dir", s.run_dir.string());
  line("steps", s.steps);
  line("backend", name_of(s.backend));
  line("target", name_of(s.target));

  const ModelConfig& m = s.model;
  line("model.name", m.name);
  line("model.architecture", m.architecture);
  line("model.vocab_size", m.vocab_size);
  line("model.hidden_size", m.hidden_size);
  line("model.intermediate_size", m.intermediate_size);
  line("model.num_layers", m.num_layers);
  line("model.num_heads", m.num_heads);
  line("model.num_kv_heads", m.num_kv_heads);
  line("model.head_dim", m.head_dim);
  line("model.rope_theta", m.rope_theta);
  line("model.rms_norm_eps", m.rms_norm_eps);
  line("model.qk_norm", m.qk_norm);
  line("model.attention_bias", m.attention_bias);
  line("model.tie_word_embeddings", m.tie_word_embeddings);
  line("model.max_position_embeddings", m.max_position_embeddings);
  line("weights", s.weights);
  line("init_seed", s.init_seed);

  const TransformerOptions& t = s.transformer;
  line("transformer.dtype", name_of(t.dtype));
  line("transformer.attention_block_size", t.attention_block_size);
  line("transformer.attention_mask", name_of(t.attention_mask));
  line("transformer.attention_window", t.attention_window);
  line("transformer.attention_mask_block", t.attention_mask_block);
  line("transformer.attention_dense", t.attention_dense);
  line("transformer.rows_are_documents", t.rows_are_documents);
  line("transformer.checkpoint_interval", t.checkpoint_interval);
  line("transformer.loss.chunk_size", t.loss.chunk_size);
  line("transformer.loss.save_softmax", t.loss.save_softmax);
  line("transformer.loss.logits_dtype", name_of(t.loss.logits_dtype));
  line("transformer.lora.enabled", t.lora.enabled);
  line("transformer.lora.rank", t.lora.rank);
  line("transformer.lora.alpha", t.lora.alpha);
  line("transformer.lora.dropout", t.lora.dropout);
  std::string targets;
  for (LoraTarget target : t.lora.targets)
    targets += std::string(targets.empty() ? "" : ",") + lora_target_name(target);
  line("transformer.lora.targets", targets);
  line("transformer.lora.seed", t.lora.seed);
  line("transformer.lora.gaussian_init", t.lora.gaussian_init);
  line("transformer.nf4", t.nf4);
  line("transformer.nf4_double_quant", t.nf4_double_quant);
  line("transformer.step_seed", t.step_seed);

  line("data_path", s.data_path);
  const BatchOptions& b = s.batch;
  line("batch.mode", static_cast<int>(b.mode));
  line("batch.packing", static_cast<int>(b.packing));
  line("batch.packing_window", b.packing_window);
  line("batch.max_tokens_per_micro_batch", b.max_tokens_per_micro_batch);
  line("batch.pad_to_multiple_of", b.pad_to_multiple_of);
  line("batch.micro_batch_size", b.micro_batch_size);
  line("batch.seq_len", b.seq_len);
  std::string buckets;
  for (int64_t bucket : b.buckets)
    buckets += (buckets.empty() ? "" : ",") + std::to_string(bucket);
  line("batch.buckets", buckets);
  line("batch.auto_buckets", b.auto_buckets);
  line("batch.group_pool", b.group_pool);
  line("batch.pad_to", static_cast<int>(b.pad_to));
  line("batch.pad_id", b.pad_id);
  line("batch.grad_accum", b.grad_accum);
  line("batch.max_sample_tokens", b.max_sample_tokens);
  line("batch.shuffle", b.shuffle);
  line("batch.seed", b.seed);
  line("batch.world_size", b.world_size);
  line("batch.rank", b.rank);
  line("synthesize_if_missing", s.synthesize_if_missing);
  const MarkovSpec& source = s.synthetic_source;
  line("synthetic_source.vocab_size", source.vocab_size);
  line("synthetic_source.order", source.order);
  line("synthetic_source.branching", source.branching);
  line("synthetic_source.concentration", source.concentration);
  line("synthetic_source.seed", source.seed);
  const LengthSpec& lengths = s.synthetic_lengths;
  line("synthetic_lengths.kind", static_cast<int>(lengths.kind));
  line("synthetic_lengths.min_length", lengths.min_length);
  line("synthetic_lengths.max_length", lengths.max_length);
  line("synthetic_lengths.median", lengths.median);
  line("synthetic_lengths.sigma", lengths.sigma);
  for (const LengthSpec::Bucket& bucket : lengths.buckets)
    out << "synthetic_lengths.bucket = " << bucket.min_length << "-" << bucket.max_length << ":"
        << bucket.weight << "\n";
  line("synthetic_documents", s.synthetic_documents);

  line("allocator.policy", static_cast<int>(s.allocator.policy));
  line("allocator.capacity", s.allocator.capacity);
  line("device", s.device ? std::string(s.device->preset->name) : std::string());
  if (s.device)
    for (const BudgetLine& l : s.device->lines)
      line(("device." + l.name).c_str(), l.bytes);
  line("cublaslt_workspace_bytes", s.cublaslt_workspace_bytes);
  line("parallel.tensor", s.layout.tensor);
  line("parallel.data", s.layout.data);
  line("parallel.sequence", s.transformer.tensor_parallel.sequence);
  line("zero.stage", s.zero.stage);
  line("zero.prefetch", s.zero.prefetch);
  line("offload_optimizer", s.offload_optimizer);

  line("checkpoint_dir", s.checkpoint_dir.string());
  line("save_every", s.save_every);
  line("save_initial", s.save_initial);
  line("save_sharded", s.save_sharded);
  line("resume_from", s.resume_from);
  line("resume_auto", s.resume_auto);
  line("collective_timeout_seconds", s.collective_timeout_seconds);

  const LrSchedule& schedule = s.trainer.schedule;
  line("trainer.schedule.lr", schedule.lr);
  line("trainer.schedule.min_lr", schedule.min_lr);
  line("trainer.schedule.warmup_steps", schedule.warmup_steps);
  line("trainer.schedule.total_steps", schedule.total_steps);
  line("trainer.schedule.decay", static_cast<int>(schedule.decay));
  line("trainer.grad_clip", s.trainer.grad_clip);
  line("trainer.loss_scale", s.trainer.loss_scale);
  line("trainer.dynamic_loss_scale", s.trainer.dynamic_loss_scale);
  line("trainer.scale_growth_interval", s.trainer.scale_growth_interval);
  line("adamw.beta1", s.adamw.beta1);
  line("adamw.beta2", s.adamw.beta2);
  line("adamw.eps", s.adamw.eps);
  line("adamw.weight_decay", s.adamw.weight_decay);
  line("adamw.master", name_of(s.adamw.master));
  line("adamw.eight_bit", s.adamw.eight_bit);
  line("adamw.min_8bit_size", s.adamw.min_8bit_size);
  line("max_nonfinite_steps", s.max_nonfinite_steps);

  line("memory_events", s.memory_events);
  line("flush_every", s.flush_every);
  return out.str();
}

}  // namespace headroom
