#include "run_experiment.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "backend/backend.h"
#include "batch_options.h"
#include "comm/mpi_comm.h"
#include "config/config.h"
#include "data/batcher.h"
#include "data/markov.h"
#include "data/token_dataset.h"
#include "data_tools.h"
#include "embedded_quickstart.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "parallel/zero.h"
#include "report/summary.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "train/run_folder.h"
#include "train/train_state.h"
#include "train/trainer.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/process_memory.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

ExperimentConfig load(const RunOptions& options) {
  if (options.config_path.empty())
    return load_config_string(kQuickstartToml, kQuickstartName, options.overrides);
  return load_config_file(options.config_path, options.overrides);
}

std::unique_ptr<SegmentSource> source_for(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return make_host_source();
    case BackendKind::kMeta:
      return make_virtual_source();
    case BackendKind::kCuda:
      break;
  }
  throw InternalError("no segment source for backend " + std::string(name_of(kind)));
}

// Keys whose values this build parses and validates but cannot run yet: a
// run that silently ignored them would plan the wrong memory, so they stop
// here with the key named.
void refuse_unbuilt_features(const ExperimentConfig& c) {
  auto refuse = [](const std::string& what, const std::string& when) {
    throw UsageError(what + ": not supported yet (" + when + ")");
  };
  if (c.attention.backend == AttentionSection::Backend::kDenseAdditive)
    refuse("attention.backend = \"dense_additive\"", "use \"block_sparse\"");
  if (c.attention.mask == AttentionSection::Mask::kDocument ||
      c.attention.mask == AttentionSection::Mask::kDflashBlock)
    refuse("attention.mask = \"" + std::string(name_of(c.attention.mask)) + "\"",
           "use \"causal\" (causal within each packed document) or \"sliding_window\"");
  if (c.checkpoint.format == CheckpointSection::Format::kSharded)
    refuse("checkpoint.format = \"sharded\"", "use \"consolidated\"");
  if (c.optimizer.master_dtype != Precision::kFp32)
    refuse("optimizer.master_dtype = \"" + std::string(name_of(c.optimizer.master_dtype)) + "\"",
           "the master weights and AdamW's moments are fp32 in this build; use \"fp32\"");
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

// adapter_config.json's base_model_name_or_path: the weights the adapters
// were trained on, or the preset when the base was initialized from model.seed.
std::string base_model_name(const ExperimentConfig& config) {
  if (!config.model.weights.empty()) return fs::absolute(config.model.weights).string();
  return config.model.hf_config.empty() ? config.model.preset : config.model.hf_config;
}

BackendKind backend_for(const ExperimentConfig& config, RunMode mode) {
  if (mode == RunMode::kPlan) return BackendKind::kMeta;
  switch (config.run.backend) {
    case RunSection::Backend::kCpu:
      return BackendKind::kCpu;
    case RunSection::Backend::kMeta:
      return BackendKind::kMeta;
    case RunSection::Backend::kCuda:
      break;
  }
  throw UsageError(
      "run.backend = \"cuda\": `train` cannot run on a GPU in this build (the cuda kernels "
      "of the model's ops are not written yet); use run.backend = \"cpu\", or `headroom plan` "
      "to plan a cuda run's memory");
}

// The plan's answer to "will it fit?", with the peak of each phase over
// every step (the step rows in the trace hold them per step).
std::string plan_verdict(const Allocator& allocator, uint64_t capacity,
                         const std::array<uint64_t, kNumPhases>& phase_peaks) {
  const MemoryStats& s = allocator.stats();
  std::string out = "\nplan: peak allocated " + format_bytes_exact(s.peak_allocated) +
                    ", peak reserved " + format_bytes_exact(s.peak_reserved) + "\n";
  out += "  peak allocated by phase:";
  for (Phase phase : kAllPhases) {
    const uint64_t bytes = phase_peaks[static_cast<int>(phase)];
    if (bytes) out += " " + std::string(name_of(phase)) + " " + format_bytes(bytes) + ",";
  }
  out.back() = '\n';
  if (capacity == 0)
    out += "  no memory.device_capacity set: nothing to check the peak against\n";
  else if (s.peak_reserved <= capacity)
    out += "  fits memory.device_capacity " + format_bytes_exact(capacity) + " with " +
           format_bytes(capacity - s.peak_reserved) + " to spare\n";
  else
    out += "  does NOT fit memory.device_capacity " + format_bytes_exact(capacity) + "\n";
  return out;
}

// The trace's size projected from its growth per step, checked at every
// flush: a run whose trace cannot fit the disk it is on stops early with the
// steps so far kept, instead of filling the disk (a plan of 10^12 steps
// would write gigabytes a minute).
class TraceGrowth {
 public:
  void check(const fs::path& path, int64_t steps_done, int64_t steps_total) {
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) return;
    if (first_steps_ < 0) {
      first_size_ = size;
      first_steps_ = steps_done;
      return;
    }
    // HDF5 grows a file chunk by chunk: judge only once several chunks'
    // worth of growth averages out.
    constexpr uint64_t kEnoughGrowth = uint64_t{16} << 20;
    if (steps_done <= first_steps_ || size < first_size_ + kEnoughGrowth) return;
    const double per_step =
        static_cast<double>(size - first_size_) / static_cast<double>(steps_done - first_steps_);
    const double needed = per_step * static_cast<double>(steps_total - steps_done);
    const fs::space_info space = fs::space(path.parent_path(), ec);
    if (ec || needed <= static_cast<double>(space.available)) return;
    throw UsageError(
        path.string() + ": the trace grows " + format_bytes(static_cast<uint64_t>(per_step)) +
        " per step; the " + std::to_string(steps_total - steps_done) + " steps left would need " +
        format_bytes(static_cast<uint64_t>(needed)) + " more but " + format_bytes(space.available) +
        " is free there: lower run.steps, or set trace.memory_events = false "
        "(the steps so far are kept)");
  }

 private:
  uint64_t first_size_ = 0;
  int64_t first_steps_ = -1;
};

std::string eta(double seconds) {
  char buf[32];
  int s = static_cast<int>(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

}  // namespace

namespace {

// The files of one rank's run in its folder, and those an earlier run left
// there that this one would replace or make stale.
struct RunFiles {
  std::string config;             // written by the lead
  std::string trace;              // this rank's
  std::vector<fs::path> earlier;  // present now: refused without --overwrite
  std::vector<fs::path> stale;    // of `earlier`, what the new files do not replace
};

bool is_checkpoint_folder(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.starts_with("step-") && name.size() > 5 &&
         name.find_first_not_of("0123456789", 5) == std::string::npos;
}

RunFiles run_files(RunMode mode, const fs::path& run_dir, const fs::path& checkpoint_dir,
                   bool resuming, int64_t resume_step, int rank, int world_size) {
  RunFiles files;
  const std::string rank_name = "rank" + std::to_string(rank);
  const std::string from = "from-step-" + std::to_string(resume_step);
  if (mode == RunMode::kPlan) {
    files.config = "plan.config.toml";
    files.trace = "plan." + rank_name + ".h5";
  } else if (resuming) {
    files.config = "config." + from + ".toml";
    files.trace = "trace." + rank_name + "." + from + ".h5";
  } else {
    files.config = "config.toml";
    files.trace = "trace." + rank_name + ".h5";
  }
  // What this run's files are named for every rank: "trace.rank<R>.h5"
  // splits into "trace.rank" + R + ".h5" (R < world_size: replaced in place).
  const std::string prefix = mode == RunMode::kPlan ? "plan.rank" : "trace.rank";
  const std::string suffix = resuming ? "." + from + ".h5" : ".h5";
  auto rank_of = [&](const std::string& name) -> int64_t {
    if (!name.starts_with(prefix) || !name.ends_with(suffix)) return -1;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoll(digits);
  };
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".staging-") != std::string::npos) continue;
    const int64_t r = rank_of(name);
    if (r >= 0) {
      files.earlier.push_back(entry.path());
      if (r >= world_size) files.stale.push_back(entry.path());
      continue;
    }
    // A fresh training replaces the whole earlier run, continuations included.
    if (mode == RunMode::kTrain && !resuming &&
        ((name.starts_with("trace.rank") && name.find(".from-step-") != std::string::npos) ||
         (name.starts_with("config.from-step-") && name.ends_with(".toml")))) {
      files.earlier.push_back(entry.path());
      files.stale.push_back(entry.path());
    }
  }
  // Its checkpoints too: a later "resume from the latest" must not pick a
  // step-N of the run this one replaced.
  if (mode == RunMode::kTrain && !resuming)
    for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint_dir, ec))
      if (entry.is_directory(ec) && is_checkpoint_folder(entry.path())) {
        files.earlier.push_back(entry.path());
        files.stale.push_back(entry.path());
      }
  std::sort(files.earlier.begin(), files.earlier.end());
  return files;
}

// Writes `text` to `path` (a staged file), naming it when that fails.
void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(path.string() + ": cannot write: " + std::strerror(errno));
  out << text;
  if (!out.flush()) throw UsageError(path.string() + ": write failed: " + std::strerror(errno));
}

// PEFT's print_trainable_parameters(), so a LoRA run's numbers can be checked
// against the ones users know.
std::string trainable_parameters_line(const Transformer& model) {
  int64_t trainable = 0, all = 0;
  for (const GroupLayout& group : model.layouts()) {
    all += group.numel;
    if (group.trainable) trainable += group.numel;
  }
  auto grouped = [](int64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return out;
  };
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.4f",
                all ? 100.0 * static_cast<double>(trainable) / static_cast<double>(all) : 0.0);
  return "  trainable params: " + grouped(trainable) + " || all params: " + grouped(all) +
         " || trainable%: " + percent + "\n";
}

// A resumed run's checkpoint must be the one this config trains: checked
// before anything is written, each failure naming the checkpoint.
TrainState check_resume(const ExperimentConfig& config, const ModelConfig& model_config,
                        const std::string& resume_dir) {
  const std::string key = "checkpoint.resume_from = " + quote_path(resume_dir) + ": ";
  try {
    if (!path_exists("checkpoint.resume_from", resume_dir)) throw UsageError("no such folder");
    TrainState state = read_train_state(resume_dir);
    // A LoRA checkpoint holds the adapters; the frozen base comes from
    // model.weights (or model.seed) as in the first run.
    if (config.lora.enabled) {
      check_adapter(model_config, lora_options_of(config), resume_dir);
    } else {
      const std::string weights = resume_dir + "/model.safetensors";
      check_weights(model_config, weights);
      // The optimizer's states follow the weights' dtype (bf16 weights have
      // fp32 masters), so a dtype change would fail later with a missing
      // tensor; say what really differs.
      const SafetensorsIndex index = SafetensorsIndex::open(weights);
      const DType want = config.model.dtype == Precision::kBf16 ? DType::kBF16 : DType::kF32;
      for (const SafetensorsEntry& entry : index.entries())
        if (to_dtype(entry.dtype) != want)
          throw UsageError("the checkpoint's weights are " +
                           std::string(safetensors_name(entry.dtype)) + " (" + entry.name + " in " +
                           weights + ") but model.dtype = \"" +
                           std::string(name_of(config.model.dtype)) +
                           "\": resume with the model.dtype the checkpoint was trained with");
    }
    if (state.step >= config.run.steps)
      throw UsageError("the checkpoint is at step " + std::to_string(state.step) +
                       ", run.steps = " + std::to_string(config.run.steps) +
                       ": nothing left to train");
    return state;
  } catch (const UsageError& e) {
    if (std::string_view(e.what()).starts_with("checkpoint.resume_from")) throw;
    throw UsageError(key + e.what());
  }
}

// One rank's run. Rank 0 alone prints, writes the run folder's config and
// the checkpoints (at ZeRO stage 0 every rank holds the same weights); every
// rank writes its own trace.
//
// Everything a user can get wrong is checked before the first file is
// replaced: the run writes under staged names (RunFolder) and moves them into
// place only once it has a result.
int run_rank(const RunOptions& options, RunMode mode, Communicator& comm, std::FILE* out) {
  const ExperimentConfig config = load(options);
  const int rank = comm.rank();
  const int world_size = comm.world_size();
  const bool lead = rank == 0;
  if (options.print_config) {
    if (lead) std::fputs(to_toml(config).c_str(), out);
    return 0;
  }
  refuse_unbuilt_features(config);
  const BackendKind kind = backend_for(config, mode);
  const bool planning = kind == BackendKind::kMeta;
  const char* verb = mode == RunMode::kPlan ? "plan" : "train";
  if (comm.is_distributed() && kind != BackendKind::kCpu)
    throw UsageError("run.backend = \"" + std::string(name_of(config.run.backend)) +
                     "\": " + std::to_string(world_size) +
                     " ranks need the cpu backend in this build (MpiComm reduces host memory)");

  // --- checks that read only ---------------------------------------------
  const ModelConfig model_config = config.model.hf_config.empty()
                                       ? model_preset(config.model.preset)
                                       : load_hf_config(config.model.hf_config);
  if (config.data.path.empty())
    throw UsageError(
        "data.path: required: a tokenized HDF5 file (docs/data-format.md), or set "
        "data.synthesize_if_missing = true to have one made");
  const bool data_exists = path_exists("data.path", config.data.path);
  if (data_exists) require_regular_file("data.path", config.data.path);
  const LengthSpec synthetic_lengths = [&] {
    try {
      return parse_length_spec(config.data.synthetic_lengths);
    } catch (const UsageError& e) {
      throw UsageError("data.synthetic_lengths = \"" + config.data.synthetic_lengths +
                       "\": " + e.what());
    }
  }();
  if (!config.model.weights.empty()) check_weights(model_config, config.model.weights);
  const fs::path run_dir = fs::path(config.run.out_dir) / config.run.name;
  // Resuming reads the checkpoint's state first, so a wrong folder is refused
  // before anything is written; the resumed part of the run gets its own
  // trace beside the earlier one, which stays as it was.
  const std::string& resume_dir = config.checkpoint.resume_from;
  const bool resuming = !resume_dir.empty() && !planning;
  const TrainState resume_state =
      resuming ? check_resume(config, model_config, resume_dir) : TrainState{};
  const fs::path checkpoint_dir =
      config.checkpoint.dir.empty() ? run_dir / "checkpoints" : fs::path(config.checkpoint.dir);
  const bool saving = !planning && (config.checkpoint.save_initial || config.checkpoint.save_every);
  // ZeRO stage >= 1 on several ranks: each rank keeps (and checkpoints) only
  // its shard of the optimizer states.
  const bool sharded = config.zero.stage >= 1 && world_size > 1;
  const int64_t optimizer_shards = sharded ? world_size : 1;

  // --- the folder: locked by the lead, files staged ----------------------
  // The lead locks the folder and writes a missing synthetic corpus; the
  // others wait for it, then stage their own traces in the locked folder.
  if (!lead) comm.barrier();
  RunFolder folder =
      lead ? RunFolder::lead(run_dir, planning ? RunFolder::Kind::kPlan : RunFolder::Kind::kTrain,
                             "run.out_dir")
           : RunFolder::follower(run_dir,
                                 planning ? RunFolder::Kind::kPlan : RunFolder::Kind::kTrain);
  const RunFiles files =
      run_files(mode, run_dir, checkpoint_dir, resuming, resume_state.step, rank, world_size);
  if (lead && !files.earlier.empty() && !options.overwrite)
    throw UsageError(files.earlier.front().string() +
                     ": exists from an earlier run; pass --overwrite to replace that run, or "
                     "choose another name with --set run.name=<name>");
  if (lead) {
    for (const fs::path& stale : files.stale)
      folder.replace_on_commit(stale);
    if (saving)
      require_writable_folder(
          config.checkpoint.dir.empty() ? "checkpoint.dir (the run folder's)" : "checkpoint.dir",
          checkpoint_dir);
    if (!data_exists) {
      if (!config.data.synthesize_if_missing)
        throw UsageError("data.path = " + quote_path(config.data.path) + ": no such file");
      std::fprintf(out,
                   "headroom %s: writing a synthetic Markov corpus to %s "
                   "(data.synthesize_if_missing)\n",
                   verb, config.data.path.c_str());
      std::fflush(out);
      const fs::path parent = fs::path(config.data.path).parent_path();
      if (!parent.empty() && !path_exists("data.path", parent)) {
        std::error_code ec;
        fs::create_directories(parent, ec);
        if (ec)
          throw UsageError("data.path = " + quote_path(config.data.path) +
                           ": cannot create its folder: " + ec.message());
      }
      MarkovSpec spec;
      spec.vocab_size = model_config.vocab_size;
      spec.order = 1;
      spec.branching = 8;
      spec.seed = static_cast<uint64_t>(config.data.seed);
      write_markov_corpus(config.data.path, spec, synthetic_lengths,
                          config.data.synthetic_documents, static_cast<uint64_t>(config.data.seed));
    }
  }
  if (lead) comm.barrier();
  if (!lead && !path_exists("data.path", config.data.path))
    throw UsageError("data.path = " + quote_path(config.data.path) + ": no such file");
  TokenDataset dataset = TokenDataset::open(config.data.path, model_config.vocab_size);
  Batcher batcher(dataset, batch_options_of(config, dataset, world_size, rank));

  const fs::path trace_path = run_dir / files.trace;
  const fs::path staged_trace = folder.stage(files.trace);
  const std::string config_toml = to_toml(config);
  if (lead) write_text_file(folder.stage(files.config), config_toml);

  AllocatorOptions allocator_options;
  allocator_options.capacity = config.memory.device_capacity;
  allocator_options.policy = config.memory.allocator == MemorySection::Allocator::kExact
                                 ? AllocatorPolicy::kExact
                                 : AllocatorPolicy::kCaching;
  Allocator allocator(source_for(kind), allocator_options);
  // A plan follows the rules of the device the run will use: a cuda run's
  // plan is the same on every host (backend/target_device.h).
  const TargetDevice target = config.run.backend == RunSection::Backend::kCuda
                                  ? TargetDevice::kCuda
                                  : TargetDevice::kHostCpu;
  std::unique_ptr<Backend> backend =
      planning ? make_meta_backend(allocator, target) : make_cpu_backend(allocator);
  // zero.offload_optimizer: the optimizer's states and update live in host
  // memory, with an allocator of their own, so they count against no
  // device capacity and are reported beside it.
  std::unique_ptr<Allocator> host_allocator;
  std::unique_ptr<Backend> host_backend;
  if (config.zero.offload_optimizer) {
    AllocatorOptions host_options;
    host_options.policy = allocator_options.policy;
    host_allocator = std::make_unique<Allocator>(
        planning ? make_virtual_source() : make_host_source(), host_options);
    host_backend =
        planning ? make_meta_backend(*host_allocator) : make_cpu_backend(*host_allocator);
  }

  TraceHeader header;
  header.run_name = config.run.name;
  header.backend = std::string(name_of(kind));
  header.device = !planning                       ? "cpu"
                  : target == TargetDevice::kCuda ? "meta (virtual), cuda target"
                                                  : "meta (virtual), host cpu target";
  header.capacity_bytes = config.memory.device_capacity;
  header.config_toml = config_toml;
  header.rank = rank;
  header.world_size = world_size;
  TraceWriter trace(staged_trace.string(), header, config.trace.memory_events);
  allocator.add_observer(&trace);

  TransformerOptions model_options;
  model_options.dtype = config.model.dtype == Precision::kBf16 ? DType::kBF16 : DType::kF32;
  model_options.attention_block_size = config.attention.block_size;
  model_options.attention_window =
      config.attention.mask == AttentionSection::Mask::kSlidingWindow ? config.attention.window : 0;
  model_options.checkpoint_interval = config.checkpoint.activations;
  model_options.loss.chunk_size = config.loss.chunk_size;
  model_options.loss.save_softmax = config.loss.mode == LossSection::Mode::kSave;
  model_options.loss.logits_dtype =
      config.loss.logits_dtype == Precision::kBf16 ? DType::kBF16 : DType::kF32;
  model_options.lora = lora_options_of(config);
  model_options.step_seed = static_cast<uint64_t>(config.run.seed);

  TrainerOptions trainer_options;
  trainer_options.schedule.lr = config.optimizer.lr;
  trainer_options.schedule.min_lr = config.schedule.min_lr;
  trainer_options.schedule.warmup_steps = config.schedule.warmup_steps;
  trainer_options.schedule.total_steps = config.run.steps;
  trainer_options.schedule.decay =
      config.schedule.decay == ScheduleSection::Decay::kCosine   ? Decay::kCosine
      : config.schedule.decay == ScheduleSection::Decay::kLinear ? Decay::kLinear
                                                                 : Decay::kConstant;
  trainer_options.grad_clip = static_cast<float>(config.optimizer.grad_clip);
  AdamWConfig adamw;
  adamw.beta1 = static_cast<float>(config.optimizer.betas[0]);
  adamw.beta2 = static_cast<float>(config.optimizer.betas[1]);
  adamw.eps = static_cast<float>(config.optimizer.eps);
  adamw.weight_decay = static_cast<float>(config.optimizer.weight_decay);

  const double entropy = dataset.attributes().source_entropy_nats.value_or(0.0);
  const std::string micro_batch =
      config.batch.mode == BatchSection::Mode::kPacked
          ? std::to_string(config.batch.max_tokens_per_micro_batch) + " tokens"
          : std::to_string(config.batch.micro_batch_size) + " padded rows";
  std::fprintf(out, "headroom %s: %s (%s, %.2fM parameters) on %s, %lld steps of %lld x %s%s\n",
               verb, model_config.name.c_str(), std::string(name_of(model_options.dtype)).c_str(),
               static_cast<double>(model_config.num_parameters()) / 1e6,
               std::string(name_of(kind)).c_str(), static_cast<long long>(config.run.steps),
               static_cast<long long>(config.batch.grad_accum), micro_batch.c_str(),
               !planning                       ? ""
               : target == TargetDevice::kCuda ? " (meta: a cuda device's allocations, no math)"
                                               : " (meta: this host cpu's allocations, no math)");
  if (entropy > 0 && !planning)
    std::fprintf(out,
                 "  data: %s, source entropy %.4f nats/token (the best loss a model can reach)\n",
                 config.data.path.c_str(), entropy);
  std::fflush(out);

  // The operating system's view, for checking the allocator against it: the
  // baseline is the resident set just before the first model allocation (the
  // program, its libraries, the dataset handle, the trace file), with the
  // kernel's high-water mark restarted there.
  const bool measure_rss = kind == BackendKind::kCpu && reset_peak_resident();
  const uint64_t rss_baseline = measure_rss ? resident_bytes() : 0;

  // The run has a result from here on (a step, a checkpoint, a postmortem):
  // its files replace the earlier run's.
  auto commit = [&] {
    if (folder.committed()) return;
    folder.commit();
    trace.renamed(trace_path.string());
  };
  auto current_trace_path = [&] { return folder.committed() ? trace_path : staged_trace; };

  int exit_code = 0;
  double last_loss = 0;
  int64_t finite_steps = 0, nonfinite_run = 0, steps_run = 0;
  std::array<uint64_t, kNumPhases> phase_peaks{};
  try {
    ZeroOptions zero_options;
    zero_options.stage = config.zero.stage;
    zero_options.prefetch = static_cast<int>(config.zero.prefetch);
    Zero zero(*backend, comm, model_options.dtype, zero_options);
    Transformer model(*backend, model_config, model_options, &zero);
    std::fputs(trainable_parameters_line(model).c_str(), out);
    std::fflush(out);  // before a postmortem on stderr
    {
      PhaseScope scope(allocator, Phase::kInit);
      model.init_random(static_cast<uint64_t>(config.model.seed));
      if (resuming && !config.lora.enabled)
        load_weights(*backend, model, resume_dir + "/model.safetensors");
      else if (!config.model.weights.empty())
        load_weights(*backend, model, config.model.weights);
      if (resuming && config.lora.enabled) load_adapter(*backend, model, resume_dir);
    }
    std::vector<GroupShard> shards;
    std::vector<Tensor> param_shards;
    for (size_t g = 0; g < zero.num_groups(); ++g) {
      shards.push_back(zero.shard(g));
      param_shards.push_back(zero.param_shard(g));
    }
    AdamW optimizer(*backend, model.layouts(), std::move(shards), std::move(param_shards), adamw,
                    zero.shards_optimizer(), host_backend.get());
    Trainer trainer(*backend, model, optimizer, trainer_options, zero);
    int64_t first_step = 0;
    if (resuming) {
      try {
        const TrainState state = load_train_state(optimizer, resume_dir, rank, optimizer_shards);
        trainer.restore_counts(state.updates, state.skipped);
        batcher.set_cursor(Cursor{state.data_epoch, state.data_position});
        first_step = state.step;
      } catch (const UsageError& e) {
        throw UsageError("checkpoint.resume_from = " + quote_path(resume_dir) + ": " + e.what());
      }
      std::fprintf(out, "  resumed from %s: step %lld, data epoch %lld, micro-batch %lld\n",
                   resume_dir.c_str(), static_cast<long long>(resume_state.step),
                   static_cast<long long>(batcher.cursor().epoch),
                   static_cast<long long>(batcher.cursor().position));
    }
    // A checkpoint: the weights (HF layout, written by the lead; under
    // ZeRO-3 every rank takes part in gathering them), every optimizer
    // shard, then the trainer state that marks the folder complete.
    auto save = [&](int64_t steps_done) {
      commit();
      const std::string dir = (checkpoint_dir / ("step-" + std::to_string(steps_done))).string();
      const SaveRole role = lead ? SaveRole::kWrite : SaveRole::kGatherOnly;
      if (config.lora.enabled)
        save_adapter(*backend, model, dir, base_model_name(config), role);
      else
        save_checkpoint(*backend, model, dir, role);
      comm.barrier();
      if (lead || sharded) save_optimizer_state(optimizer, dir, rank, optimizer_shards);
      comm.barrier();
      const Cursor cursor = batcher.cursor();
      if (lead)
        save_trainer_state(TrainState{steps_done, trainer.updates(), trainer.skipped_steps(),
                                      cursor.epoch, cursor.position, optimizer_shards},
                           dir);
    };
    if (saving && config.checkpoint.save_initial && !resuming) save(0);
    phase_peaks = allocator.stats().peak_allocated_by_phase;  // init, before step 0 resets it
    const auto run_start = std::chrono::steady_clock::now();
    auto last_progress = run_start;
    TraceGrowth growth;
    for (int64_t step = first_step; step < config.run.steps; ++step) {
      std::vector<Batch> micro_batches = batcher.next_step();
      StepRecord record = trainer.step(step, micro_batches);
      if (planning) {
        record.loss = std::numeric_limits<double>::quiet_NaN();
        record.grad_norm = std::numeric_limits<double>::quiet_NaN();
      }
      last_loss = record.loss;
      ++steps_run;
      std::vector<PhasePeakRecord> peaks;
      for (Phase phase : kAllPhases) {
        const int p = static_cast<int>(phase);
        if (allocator.stats().peak_allocated_by_phase[p] == 0) continue;
        phase_peaks[p] = std::max(phase_peaks[p], allocator.stats().peak_allocated_by_phase[p]);
        peaks.push_back(PhasePeakRecord{step, phase, allocator.stats().peak_allocated_by_phase[p],
                                        allocator.stats().peak_reserved_by_phase[p]});
      }
      trace.append_step(record, peaks);
      commit();
      if ((step + 1) % config.trace.flush_every == 0 || step + 1 == config.run.steps) {
        trace.flush(allocator.tags());
        growth.check(current_trace_path(), step + 1 - first_step, config.run.steps - first_step);
      }
      if (saving && config.checkpoint.save_every > 0 &&
          (step + 1) % config.checkpoint.save_every == 0)
        save(step + 1);

      const auto now = std::chrono::steady_clock::now();
      const double elapsed = std::chrono::duration<double>(now - run_start).count();
      const double remaining = elapsed / static_cast<double>(step + 1 - first_step) *
                               static_cast<double>(config.run.steps - step - 1);
      if (!planning) {
        std::fprintf(out, "step %lld/%lld  loss %.4f  %.0f tok/s  peak %s  eta %s%s\n",
                     static_cast<long long>(step + 1), static_cast<long long>(config.run.steps),
                     record.loss, record.tokens_per_second,
                     format_bytes(record.peak_allocated).c_str(), eta(remaining).c_str(),
                     record.skipped ? "  (skipped: not finite)" : "");
      } else if (std::chrono::duration<double>(now - last_progress).count() >= 5.0 &&
                 step + 1 < config.run.steps) {
        // A plan is quick step by step but may have many: say where it is.
        last_progress = now;
        std::fprintf(out, "plan: step %lld/%lld  peak %s  eta %s\n",
                     static_cast<long long>(step + 1), static_cast<long long>(config.run.steps),
                     format_bytes(allocator.stats().peak_allocated).c_str(),
                     eta(remaining).c_str());
      }
      std::fflush(out);
      if (!planning) {
        if (record.skipped) {
          ++nonfinite_run;
        } else {
          nonfinite_run = 0;
          ++finite_steps;
        }
        if (config.optimizer.max_nonfinite_steps > 0 &&
            nonfinite_run >= config.optimizer.max_nonfinite_steps)
          throw NumericalError(
              std::to_string(nonfinite_run) + " consecutive steps (to step " +
              std::to_string(step + 1) +
              ") had a non-finite loss or gradient and were skipped: stopping "
              "(optimizer.max_nonfinite_steps = " +
              std::to_string(config.optimizer.max_nonfinite_steps) +
              "); lower optimizer.lr, check the weights and data, or see the trace's /steps");
      }
    }
    if (!planning && finite_steps == 0)
      throw NumericalError("none of the " + std::to_string(steps_run) +
                           " steps had a finite loss and gradient (every update was skipped)");
  } catch (const OutOfMemory& oom) {
    commit();
    trace.flush(allocator.tags());
    trace.write_oom(oom.postmortem());
    if (world_size > 1)
      std::fprintf(stderr, "rank %d of %d ran out of memory:\n", rank, world_size);
    std::fprintf(stderr, "%s", format_postmortem(oom.postmortem()).c_str());
    std::fprintf(stderr, "postmortem written to %s (/oom)\n", trace_path.string().c_str());
    exit_code = static_cast<int>(ExitCode::kOutOfMemory);
  } catch (const NumericalError& e) {
    // The steps that led here are the evidence: keep them.
    trace.flush(allocator.tags());
    allocator.remove_observer(&trace);
    trace.close();
    throw;
  }
  allocator.remove_observer(&trace);
  trace.close();

  // After an OOM the postmortem above is the message; the summary would
  // repeat it. `headroom report` shows both on demand.
  if (exit_code == 0) {
    if (entropy > 0 && !planning)
      std::fprintf(out, "\nfinal loss %.4f nats/token vs source entropy %.4f (gap %.4f)\n",
                   last_loss, entropy, last_loss - entropy);
    std::fprintf(out, "\n%s", summarize_trace(TraceReader::open(trace_path.string())).c_str());
    if (planning)
      std::fprintf(out, "%s",
                   plan_verdict(allocator, config.memory.device_capacity, phase_peaks).c_str());
    if (host_allocator) {
      const MemoryStats& host = host_allocator->stats();
      std::fprintf(out,
                   "\nhost memory (zero.offload_optimizer): peak allocated %s, peak reserved %s; "
                   "optim %s, comm (transfer buffers) %s\n",
                   format_bytes(host.peak_allocated).c_str(),
                   format_bytes(host.peak_reserved).c_str(),
                   format_bytes(host.peak_by_category[static_cast<int>(Category::kOptim)]).c_str(),
                   format_bytes(host.peak_by_category[static_cast<int>(Category::kComm)]).c_str());
    }
    if (measure_rss) {
      // Offloaded states are host memory too: the resident set holds both.
      const uint64_t reserved =
          allocator.peak_reserved() + (host_allocator ? host_allocator->peak_reserved() : 0);
      const uint64_t above = peak_resident_bytes() - rss_baseline;
      std::fprintf(
          out,
          "\nrss check: peak resident %s above the baseline of %s; allocator peak reserved %s "
          "(ratio %.3f)\n",
          format_bytes_exact(above).c_str(), format_bytes(rss_baseline).c_str(),
          format_bytes_exact(reserved).c_str(),
          reserved ? static_cast<double>(above) / static_cast<double>(reserved) : 0.0);
    }
  }
  return exit_code;
}

// `plan --world-size N`: rank after rank in this process, each on a
// simulated communicator with its own batches. Rank 0 prints its plan as a
// single-rank plan does; then a table of every rank's peaks, read back from
// the plan traces. The exit code is the worst rank's.
int plan_ranks(const RunOptions& options) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> devnull(std::fopen("/dev/null", "w"),
                                                          &std::fclose);
  if (!devnull) throw InternalError("cannot open /dev/null");
  int worst = 0;
  for (int rank = 0; rank < options.world_size; ++rank) {
    std::unique_ptr<Communicator> comm = make_simulated_comm(rank, options.world_size);
    worst = std::max(worst,
                     run_rank(options, RunMode::kPlan, *comm, rank == 0 ? stdout : devnull.get()));
  }
  const ExperimentConfig config = load(options);
  const uint64_t capacity = config.memory.device_capacity;
  std::printf("\nplan of %d data-parallel ranks (zero.stage %d), peaks per rank:\n",
              options.world_size, config.zero.stage);
  std::printf("  rank  peak allocated         peak reserved          longest sample  %s\n",
              capacity ? "fits" : "");
  for (int rank = 0; rank < options.world_size; ++rank) {
    const fs::path path = fs::path(config.run.out_dir) / config.run.name /
                          ("plan.rank" + std::to_string(rank) + ".h5");
    const TraceReader trace = TraceReader::open(path.string());
    uint64_t allocated = 0, reserved = 0;
    int64_t longest = 0;
    for (const StepRecord& step : trace.steps()) {
      allocated = std::max(allocated, step.peak_allocated);
      reserved = std::max(reserved, step.peak_reserved);
      longest = std::max(longest, step.longest_sample);
    }
    std::string verdict = capacity == 0 ? "" : reserved <= capacity ? "yes" : "NO";
    if (trace.has_oom()) {
      // The steps before the failing one are in the table; the postmortem
      // says where the failing request came.
      const Postmortem oom = trace.oom();
      verdict = "OUT OF MEMORY at step " + std::to_string(oom.step) + " (" +
                std::string(name_of(oom.phase)) + ", " + format_bytes(oom.requested_bytes) +
                " for " + oom.tag + ")";
    }
    std::printf("  %4d  %-21s  %-21s  %14lld  %s\n", rank, format_bytes(allocated).c_str(),
                format_bytes(reserved).c_str(), static_cast<long long>(longest), verdict.c_str());
  }
  return worst;
}

}  // namespace

int export_merged(const RunOptions& options, const std::string& adapter, const std::string& out) {
  const ExperimentConfig config = load(options);
  if (!config.lora.enabled)
    throw UsageError(
        "lora.enabled = false: export --merge folds LoRA adapters into their base; set the "
        "[lora] the adapters were trained with (their shapes come from it)");
  const ModelConfig model_config = config.model.hf_config.empty()
                                       ? model_preset(config.model.preset)
                                       : load_hf_config(config.model.hf_config);
  const LoraOptions lora = lora_options_of(config);
  // Every input is checked before anything is written.
  check_adapter(model_config, lora, adapter);
  if (!config.model.weights.empty()) check_weights(model_config, config.model.weights);
  const fs::path target = fs::path(out) / "model.safetensors";
  if (fs::exists(target) && !options.overwrite)
    throw UsageError(target.string() + ": exists; pass --overwrite to replace it");

  Allocator allocator(make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  std::unique_ptr<Backend> backend = make_cpu_backend(allocator);
  TransformerOptions model_options;
  model_options.dtype = config.model.dtype == Precision::kBf16 ? DType::kBF16 : DType::kF32;
  model_options.lora = lora;
  Transformer model(*backend, model_config, model_options);
  model.init_random(static_cast<uint64_t>(config.model.seed));
  if (!config.model.weights.empty()) load_weights(*backend, model, config.model.weights);
  load_adapter(*backend, model, adapter);
  model.merge_adapters();
  save_checkpoint(*backend, model, out);
  std::printf(
      "headroom export: merged %zu adapter group(s) (r = %lld, alpha = %g, %zu target(s)) into "
      "%s (%s, %s)\n  base: %s\n  wrote %s and config.json\n",
      model.layouts().size() - model.num_base_groups(), static_cast<long long>(lora.rank),
      static_cast<double>(lora.alpha), lora.targets.size(), model_config.name.c_str(),
      std::string(name_of(model_options.dtype)).c_str(),
      format_bytes(static_cast<uint64_t>(model_config.num_parameters()) *
                   size_of(model_options.dtype))
          .c_str(),
      base_model_name(config).c_str(), target.string().c_str());
  return 0;
}

int run_experiment(const RunOptions& options, RunMode mode) {
  // Only `train` under an MPI launcher starts MPI: a plain `headroom plan`
  // or `train` stays a single process that needs no launcher.
  if (mode == RunMode::kPlan && options.world_size > 1) return plan_ranks(options);
  if (mode == RunMode::kTrain && srun_tasks_without_mpi() > 0)
    throw UsageError("srun started " + std::to_string(srun_tasks_without_mpi()) +
                     " tasks without an MPI plugin, so each would train alone: launch with "
                     "`srun --mpi=pmix ...` (Open MPI's PMIx client; Debian's Open MPI has no "
                     "PMI-2 support)");
  if (mode != RunMode::kTrain || !launched_by_mpi()) {
    std::unique_ptr<Communicator> single = make_single_rank_comm();
    return run_rank(options, mode, *single, stdout);
  }
  std::unique_ptr<Communicator> comm = make_mpi_comm();
  if (!comm->is_distributed()) return run_rank(options, mode, *comm, stdout);
  // Rank 0 speaks for the job; the others' stdout would repeat it N times.
  // Their stderr stays: an error names the rank it happened on.
  if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    throw InternalError("cannot silence stdout of rank " + std::to_string(comm->rank()));
  // A rank that fails must take the job down with it: the others would
  // otherwise wait in the next collective forever. Its message (and, after
  // an OOM, its postmortem and closed trace) come first.
  int exit_code = 0;
  try {
    exit_code = run_rank(options, mode, *comm, stdout);
  } catch (const Error& e) {
    std::fprintf(stderr, "headroom train: rank %d of %d: %s\n", comm->rank(), comm->world_size(),
                 e.what());
    exit_code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headroom train: rank %d of %d: internal error: %s\n", comm->rank(),
                 comm->world_size(), e.what());
    exit_code = static_cast<int>(ExitCode::kInternal);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  if (exit_code != 0) comm->abort(exit_code);
  comm->barrier();
  return 0;
}

}  // namespace headroom
