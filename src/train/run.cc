#include "train/run.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "data/batcher.h"
#include "data/markov.h"
#include "data/token_dataset.h"
#include "memory/segment_source.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "parallel/zero.h"
#include "trace/writer.h"
#include "train/auto_resume.h"
#include "train/optimizer.h"
#include "train/resume_check.h"
#include "train/run_files.h"
#include "train/run_folder.h"
#include "train/sharded_checkpoint.h"
#include "train/trace_growth.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/log.h"
#include "util/process_memory.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

std::unique_ptr<SegmentSource> source_for(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return make_host_source();
    case BackendKind::kMeta:
      return make_virtual_source();
    case BackendKind::kCuda:
#ifdef HEADROOM_HAVE_CUDA
      return make_cuda_source();
#else
      break;
#endif
  }
  throw InternalError("no segment source for backend " + std::string(name_of(kind)));
}

// Writes `text` to `path` (a staged file), naming it when that fails.
void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(path.string() + ": cannot write: " + std::strerror(errno));
  out << text;
  if (!out.flush()) throw UsageError(path.string() + ": write failed: " + std::strerror(errno));
}

// data.synthesize_if_missing: the corpus at data.path, its folder made.
void synthesize_corpus(const RunSettings& s) {
  const fs::path parent = fs::path(s.data_path).parent_path();
  if (!parent.empty() && !path_exists("data.path", parent)) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      throw UsageError("data.path = " + quote_path(s.data_path) +
                       ": cannot create its folder: " + ec.message());
  }
  write_markov_corpus(s.data_path, s.synthetic_source, s.synthetic_lengths, s.synthetic_documents,
                      s.synthetic_source.seed);
}

TraceHeader trace_header(const RunSettings& s, const std::string& config_toml, int rank,
                         int world_size) {
  TraceHeader header;
  header.run_name = s.name;
  header.backend = std::string(name_of(s.backend));
  header.device = s.backend != BackendKind::kMeta   ? "cpu"
                  : s.target == TargetDevice::kCuda ? "meta (virtual), cuda target"
                                                    : "meta (virtual), host cpu target";
  header.capacity_bytes = s.allocator.capacity;
  if (s.device)
    for (const BudgetLine& line : s.device->lines)
      header.outside_allocator +=
          line.name + " " + std::to_string(line.bytes) + " " + line.source + "\n";
  header.config_toml = config_toml;
  header.rank = rank;
  header.world_size = world_size;
  return header;
}

// The peaks of every phase the step touched, for the trace's
// /memory/phase_peaks; `phase_peaks` keeps the highest of each over the run.
std::vector<PhasePeakRecord> phase_peaks_of_step(const MemoryStats& stats, int64_t step,
                                                 std::array<uint64_t, kNumPhases>& phase_peaks) {
  std::vector<PhasePeakRecord> peaks;
  for (Phase phase : kAllPhases) {
    const int p = static_cast<int>(phase);
    if (stats.peak_allocated_by_phase[p] == 0) continue;
    phase_peaks[p] = std::max(phase_peaks[p], stats.peak_allocated_by_phase[p]);
    peaks.push_back(PhasePeakRecord{step, phase, stats.peak_allocated_by_phase[p],
                                    stats.peak_reserved_by_phase[p]});
  }
  return peaks;
}

// Whether any rank was asked to stop: every rank decides alike, so all stop
// after the same step (the next collective would otherwise never complete).
bool stop_agreed(const StopRequest& stop, Communicator& comm) {
  double requested = stop.requested() ? 1.0 : 0.0;
  if (comm.world_size() > 1) comm.all_reduce_sum(std::span<double>(&requested, 1));
  return requested > 0;
}

// The non-finite rule (optimizer.max_nonfinite_steps): the message that
// stops the run, or "" to go on.
class NonFiniteCount {
 public:
  explicit NonFiniteCount(int64_t max_run) : max_run_(max_run) {}

  // `overflow`: skipped for a dynamic loss scale's overflow, which is how
  // that scale finds its level, not a failure: it neither counts nor resets.
  std::string after(const StepRecord& record, bool overflow) {
    if (overflow) {
      ++steps_;
      return "";
    }
    if (record.skipped) {
      ++run_;
    } else {
      run_ = 0;
      ++finite_;
    }
    ++steps_;
    if (max_run_ == 0 || run_ < max_run_) return "";
    // A finite loss with non-finite gradients under a constant scale: the
    // scale overflowed fp16, not the model.
    const bool scale_overflow = std::isfinite(record.loss) && record.loss_scale > 1;
    return std::to_string(run_) + " consecutive steps (to step " + std::to_string(record.step + 1) +
           ") had a non-finite loss or gradient and were skipped: stopping "
           "(optimizer.max_nonfinite_steps = " +
           std::to_string(max_run_) + "); " +
           (scale_overflow ? "the loss was finite but the gradients overflowed at loss scale " +
                                 std::to_string(static_cast<int64_t>(record.loss_scale)) +
                                 ": set optimizer.loss_scale = \"dynamic\" or a smaller constant"
                           : std::string("lower optimizer.lr, check the weights and data, or see "
                                         "the trace's /steps"));
  }
  // At the end of a run: "" unless no step at all was finite.
  std::string at_end() const {
    if (finite_ > 0 || steps_ == 0) return "";
    return "none of the " + std::to_string(steps_) +
           " steps had a finite loss and gradient (every update was skipped)";
  }

 private:
  int64_t max_run_;
  int64_t run_ = 0;
  int64_t finite_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Run::Run(const ExperimentConfig& config, RunMode mode, Communicator& comm, RunControl control)
    : config_(config),
      settings_(run_settings_of(config, mode, comm.world_size(), comm.rank())),
      comm_(comm),
      control_(control) {
  const RunSettings& s = settings_;
  if (comm.is_distributed() && !comm.moves_tensors_of(s.backend))
    throw UsageError("run.backend = \"" + std::string(name_of(config.run.backend)) +
                     "\": " + std::to_string(comm.world_size()) +
                     " ranks of this job's communicator cannot reduce its tensors (MPI moves "
                     "host memory, NCCL device memory)");
  if (s.data_path.empty())
    throw UsageError(
        "data.path: required: a tokenized HDF5 file (docs/data-format.md), or set "
        "data.synthesize_if_missing = true to have one made");
  data_exists_ = path_exists("data.path", s.data_path);
  if (data_exists_) require_regular_file("data.path", s.data_path);
  if (!s.weights.empty()) check_weights(s.model, s.weights);
  // A resumed run reads the checkpoint's state first, so a wrong folder is
  // refused before anything is written; a meta run computes nothing to
  // continue.
  resuming_ = !s.resume_from.empty() && s.backend != BackendKind::kMeta;
  if (resuming_) resume_state_ = check_resume(config, s.model, s.resume_from);
  // checkpoint.resume = "auto" (the config rules keep resume_from empty):
  // the newest complete checkpoint this config wrote, or a fresh start.
  if (s.resume_auto && s.backend != BackendKind::kMeta) {
    AutoResume found = find_auto_resume(config, s.run_dir, s.checkpoint_dir);
    auto_own_folder_ = found.folder_is_this_runs;
    auto_passed_over_ = std::move(found.passed_over);
    if (!found.checkpoint.empty()) {
      if (found.state.step >= s.steps)
        throw UsageError("checkpoint.resume = \"auto\": " + quote_path(found.checkpoint) +
                         " is at step " + std::to_string(found.state.step) +
                         " and run.steps = " + std::to_string(s.steps) +
                         ": this run is complete, nothing left to train (raise run.steps and "
                         "continue with checkpoint.resume_from, or train it again with "
                         "checkpoint.resume = \"never\" --overwrite)");
      resume_state_ = check_resume(config, s.model, found.checkpoint);
      settings_.resume_from = found.checkpoint;
      resuming_ = true;
    }
  }
}

RunResult Run::execute(RunObserver& observer) {
  if (executed_) throw InternalError("Run::execute: a Run executes once");
  executed_ = true;
  const RunSettings& s = settings_;
  const int rank = comm_.rank();
  const int world_size = comm_.world_size();
  const bool lead = rank == 0;
  const bool planning = s.backend == BackendKind::kMeta;
  // Before the folder is locked or anything staged: a cuda run that cannot
  // run here (no toolkit, no device, an op without a cuda kernel) says so.
  if (s.backend == BackendKind::kCuda)
    require_cuda_run(!s.transformer.attention_dense, s.model.head_dim);
  // parallel.tensor: this rank's tensor-parallel group (consecutive ranks)
  // and its data-parallel group (every layout.tensor-th rank); ZeRO, the
  // gradients' reduction and the data are over the latter. Made by every
  // rank here, before anything is written (a communicator without groups
  // refuses).
  std::unique_ptr<Communicator> tensor_group, data_group;
  if (s.layout.tensor > 1) {
    tensor_group = comm_.subgroup(rank - s.layout.tensor_rank, 1, s.layout.tensor);
    data_group = comm_.subgroup(s.layout.tensor_rank, s.layout.tensor, s.layout.data);
  }
  Communicator& data_comm = data_group ? *data_group : comm_;
  // checkpoint.resume = "auto" also checkpoints the last step, so that a
  // requeued run that already finished finds itself complete.
  const bool saving = !planning && (s.save_initial || s.save_every > 0 || s.resume_auto);
  // ZeRO stage >= 1 on several ranks: each rank keeps (and checkpoints) only
  // its shard of the optimizer states.
  const bool sharded = s.zero.stage >= 1 && data_comm.world_size() > 1;
  const int64_t optimizer_shards = sharded ? data_comm.world_size() : 1;
  const int64_t micro_batches_per_step = static_cast<int64_t>(s.layout.data) * s.batch.grad_accum;
  const RunFolder::Kind kind =
      s.mode == RunMode::kPlan ? RunFolder::Kind::kPlan : RunFolder::Kind::kTrain;

  // --- the folder: locked by the lead, files staged ----------------------
  // The lead locks the folder and writes a missing synthetic corpus; the
  // others wait for it, then stage their own traces in the locked folder.
  if (!lead) comm_.barrier();
  RunFolder folder =
      lead ? RunFolder::lead(s.run_dir, kind, "run.out_dir") : RunFolder::follower(s.run_dir, kind);
  const RunFiles files =
      run_files(kind, s.run_dir, s.checkpoint_dir, resuming_, resume_state_.step, rank, world_size);
  if (s.resume_auto && !planning)
    observer.on_auto_resume(resuming_ ? s.resume_from : "", auto_passed_over_);
  // checkpoint.resume = "auto" replaces, without --overwrite, what earlier
  // attempts of this same run left: a continuation's files of the same
  // name, or everything when none of its checkpoints is complete.
  const bool own_files = s.resume_auto && (resuming_ || auto_own_folder_);
  if (lead && !files.earlier.empty() && !control_.overwrite && !own_files)
    throw UsageError(files.earlier.front().string() + ": exists from an earlier run" +
                     (s.resume_auto ? " with another config (checkpoint.resume = \"auto\" found no "
                                      "complete checkpoint of this config)"
                                    : "") +
                     "; pass --overwrite to replace that run, or "
                     "choose another name with --set run.name=<name>");
  if (lead) {
    for (const fs::path& stale : files.stale)
      folder.replace_on_commit(stale);
    if (saving)
      require_writable_folder(
          config_.checkpoint.dir.empty() ? "checkpoint.dir (the run folder's)" : "checkpoint.dir",
          s.checkpoint_dir);
    if (!data_exists_) {
      if (!s.synthesize_if_missing)
        throw UsageError("data.path = " + quote_path(s.data_path) + ": no such file");
      observer.on_corpus_synthesis(s);
      synthesize_corpus(s);
    }
  }
  if (lead) comm_.barrier();
  if (!lead && !path_exists("data.path", s.data_path))
    throw UsageError("data.path = " + quote_path(s.data_path) + ": no such file");
  TokenDataset dataset = TokenDataset::open(s.data_path, s.model.vocab_size);
  BatchOptions batch_options = s.batch;
  batch_options.pad_id = pad_id_of(dataset);
  Batcher batcher(dataset, batch_options);
  const std::vector<int64_t> resolved_buckets = batcher.options().buckets;

  const fs::path trace_path = s.run_dir / files.trace;
  const fs::path staged_trace = folder.stage(files.trace);
  const std::string config_toml = to_toml(config_);
  if (lead) write_text_file(folder.stage(files.config), config_toml);
  // Declared before the allocator, so it outlives every event it observes.
  TraceWriter trace(staged_trace.string(), trace_header(s, config_toml, rank, world_size),
                    s.memory_events);

  // A plan follows the rules of the device the run will use: a cuda run's
  // plan is the same on every host (backend/target_device.h).
  Allocator allocator(source_for(s.backend), s.allocator);
  std::unique_ptr<Backend> backend =
      make_backend(s.backend, s.target, allocator, s.cublaslt_workspace_bytes);
  // Collectives on the backend's stream, after the kernels that wrote their
  // tensors; given back before the backend (and its stream) goes.
  struct LentStream {
    Communicator& comm;
    ~LentStream() { comm.use_device_stream(nullptr); }
  } lent_stream{comm_};
  comm_.use_device_stream(backend->device_stream());
  struct LentStreams {
    Communicator* groups[2];
    ~LentStreams() {
      for (Communicator* group : groups)
        if (group) group->use_device_stream(nullptr);
    }
  } lent_streams{{tensor_group.get(), data_group.get()}};
  for (Communicator* group : lent_streams.groups)
    if (group) group->use_device_stream(backend->device_stream());
  // zero.offload_optimizer: the optimizer's states and update live in host
  // memory, with an allocator of their own, so they count against no
  // device capacity and are reported beside it.
  std::unique_ptr<Allocator> host_allocator;
  std::unique_ptr<Backend> host_backend;
  if (s.offload_optimizer) {
    AllocatorOptions host_options;
    host_options.policy = s.allocator.policy;
    const BackendKind host_kind = planning ? BackendKind::kMeta : BackendKind::kCpu;
    std::unique_ptr<SegmentSource> host_source = source_for(host_kind);
#ifdef HEADROOM_HAVE_CUDA
    // Beside a GPU the states are page-locked: the per-step gradient and
    // parameter copies then run by DMA (segment_source.h).
    if (!planning && s.backend == BackendKind::kCuda) host_source = make_pinned_host_source();
#endif
    host_allocator = std::make_unique<Allocator>(std::move(host_source), host_options);
    host_backend = make_backend(host_kind, TargetDevice::kHostCpu, *host_allocator);
  }
  allocator.add_observer(&trace);

  // run.collective_timeout: a collective that hangs ends the job, with what
  // it waited for in stderr and in this rank's trace. The watchdog calls in
  // while this thread is blocked in the collective, so the trace and the
  // allocator are idle (collective_watchdog.h).
  int64_t step_now = -1;  // the step in flight; -1 before the first
  const std::function<std::string(const std::string&)> describe_timeout =
      [&, rank, world_size](const std::string& what) {
        const std::string line =
            what +
            (step_now < 0 ? ", before the first step" : ", in step " + std::to_string(step_now)) +
            ", phase " + std::string(name_of(allocator.phase()));
        try {
          trace.flush(allocator.tags());
          trace.write_collective_timeout("rank " + std::to_string(rank) + " of " +
                                         std::to_string(world_size) + ": " + line);
        } catch (...) {
          // stderr still says it; the job ends either way.
        }
        return line;
      };
  comm_.set_collective_timeout(s.collective_timeout_seconds, describe_timeout);
  for (Communicator* group : lent_streams.groups)
    if (group) group->set_collective_timeout(s.collective_timeout_seconds, describe_timeout);
  // Past this function the trace is gone: the watchdog stays, without it.
  struct WatchdogWithoutTrace {
    Communicator* comms[3];
    int64_t seconds;
    ~WatchdogWithoutTrace() {
      for (Communicator* comm : comms)
        if (comm) comm->set_collective_timeout(seconds, {});
    }
  } watchdog_without_trace{{&comm_, tensor_group.get(), data_group.get()},
                           s.collective_timeout_seconds};

  RunResult result;
  result.buckets = resolved_buckets;
  result.trace_path = trace_path;
  result.capacity = s.allocator.capacity;
  result.device = s.device;
  result.source_entropy_nats = dataset.attributes().source_entropy_nats.value_or(0.0);
  observer.on_started(s, result.source_entropy_nats);

  // The operating system's view, for checking the allocator against it: the
  // baseline is the resident set just before the first model allocation (the
  // program, its libraries, the dataset handle, the trace file), with the
  // kernel's high-water mark restarted there.
  const bool measure_rss = s.backend == BackendKind::kCpu && reset_peak_resident();
  const uint64_t rss_baseline = measure_rss ? resident_bytes() : 0;
  const uint64_t rss_file_baseline = measure_rss ? resident_file_bytes() : 0;

  // The run has a result from here on (a step, a checkpoint, a postmortem):
  // its files replace the earlier run's.
  auto commit = [&] {
    if (folder.committed()) return;
    folder.commit();
    trace.renamed(trace_path.string());
  };
  auto current_trace_path = [&] { return folder.committed() ? trace_path : staged_trace; };

  try {
    Zero zero(*backend, data_comm, s.transformer.dtype, s.zero);
    TransformerOptions transformer_options = s.transformer;
    transformer_options.tensor_parallel.group = tensor_group.get();
    Transformer model(*backend, s.model, transformer_options, &zero);
    int64_t trainable = 0, all = 0;
    for (const GroupLayout& group : model.layouts()) {
      all += group.numel;
      if (group.trainable) trainable += group.numel;
    }
    observer.on_model_built(trainable, all);
    {
      PhaseScope scope(allocator, Phase::kInit);
      model.init_random(s.init_seed);
      if (resuming_ && resume_state_.sharded_format)
        load_sharded_weights(*backend, model, read_shard_index(s.resume_from));
      else if (resuming_ && !s.transformer.lora.enabled)
        load_weights(*backend, model, s.resume_from + "/model.safetensors");
      else if (!s.weights.empty())
        load_weights(*backend, model, s.weights);
      if (resuming_ && s.transformer.lora.enabled) load_adapter(*backend, model, s.resume_from);
    }
    std::vector<GroupShard> shards;
    std::vector<Tensor> param_shards;
    for (size_t g = 0; g < zero.num_groups(); ++g) {
      shards.push_back(zero.shard(g));
      param_shards.push_back(zero.param_shard(g));
    }
    AdamW optimizer(*backend, model.layouts(), std::move(shards), std::move(param_shards), s.adamw,
                    zero.shards_optimizer(), host_backend.get());
    Trainer trainer(*backend, model, optimizer, s.trainer, zero);
    int64_t first_step = 0;
    if (resuming_) {
      try {
        // Any world size, parallel.tensor and ZeRO stage: each rank reads
        // its part under this run's sharding (train/sharded_checkpoint.h).
        TensorParallelPart part{s.layout.tensor_rank, s.layout.tensor, {}};
        for (size_t g = 0; g < model.layouts().size(); ++g)
          part.groups.push_back(model.split_group(g));
        const TrainState state =
            load_train_state(optimizer, model.layouts(), s.resume_from, s.layout.data_rank,
                             s.layout.data, zero.shards_optimizer(), part);
        trainer.restore_counts(state.updates, state.skipped);
        if (state.loss_scale > 0)
          trainer.restore_loss_scale(state.loss_scale, state.scale_clean_steps);
        batcher.set_cursor(Cursor{state.data_epoch, state.data_position});
        first_step = state.step;
        if (lead && state.micro_batches_per_step > 0 &&
            state.micro_batches_per_step != micro_batches_per_step)
          log::warn(
              "checkpoint.resume_from = " + quote_path(s.resume_from) +
              ": it was written by a run "
              "training " +
              std::to_string(state.micro_batches_per_step) +
              " micro-batches a step; this one trains " + std::to_string(micro_batches_per_step) +
              " (batch.grad_accum = " + std::to_string(s.batch.grad_accum) + " on each of " +
              std::to_string(s.layout.data) +
              " data-parallel ranks), so its steps are not the ones that run would have taken; "
              "batch.global_micro_batches keeps a step's micro-batches whatever the world size");
      } catch (const UsageError& e) {
        throw UsageError("checkpoint.resume_from = " + quote_path(s.resume_from) + ": " + e.what());
      }
      observer.on_resumed(s.resume_from, resume_state_, batcher.cursor());
    }
    result.first_step = result.next_step = first_step;

    // A checkpoint. Consolidated: the weights (HF layout, written by the
    // lead; under ZeRO-3 every rank takes part in gathering them), every
    // optimizer shard. Sharded: every rank writes its part of both at once,
    // nothing gathered, and the lead the index. Then the trainer state that
    // marks the folder complete, once every rank's files are in place.
    auto save = [&](int64_t steps_done) {
      commit();
      const std::string dir = (s.checkpoint_dir / ("step-" + std::to_string(steps_done))).string();
      const SaveRole role = lead ? SaveRole::kWrite : SaveRole::kGatherOnly;
      const auto save_start = std::chrono::steady_clock::now();
      if (s.save_sharded) {
        if (lead) prepare_sharded_folder(dir);
        comm_.barrier();
        save_shard(*backend, model, zero, optimizer, dir, s.layout.data_rank, s.layout.data);
        if (lead) save_shard_index(model, zero, optimizer, dir, s.layout.data);
        comm_.barrier();
      } else {
        if (s.transformer.lora.enabled)
          save_adapter(*backend, model, dir, base_model_name(config_), role);
        else
          save_checkpoint(*backend, model, dir, role);
        comm_.barrier();
        // Each data-parallel shard once; under parallel.tensor once per
        // tensor-parallel part (the first group's ranks when unsharded).
        if (s.layout.data_rank == 0 || sharded)
          save_optimizer_state(optimizer, dir, s.layout.data_rank, optimizer_shards,
                               s.layout.tensor_rank, s.layout.tensor);
        comm_.barrier();
      }
      const Cursor cursor = batcher.cursor();
      // Which config wrote it (checkpoint.resume = "auto" continues only its
      // own), then the marker that makes the folder complete.
      if (lead) write_file_atomically(dir + "/" + kRunConfigFile, run_identity(config_));
      if (lead)
        save_trainer_state(
            TrainState{steps_done, trainer.updates(), trainer.skipped_steps(), cursor.epoch,
                       cursor.position, s.save_sharded ? s.layout.data : optimizer_shards,
                       s.save_sharded, trainer.loss_scale(), trainer.scale_clean_steps(),
                       s.layout.tensor, micro_batches_per_step},
            dir);
      result.checkpoint = dir;
      result.checkpoint_seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - save_start).count());
      observer.on_checkpoint_saved(steps_done, dir);
    };
    if (saving && s.save_initial && !resuming_) save(0);
    result.phase_peaks =
        allocator.stats().peak_allocated_by_phase;  // init, before step 0 resets it

    // A stop asked for before the first step (during the set-up): nothing
    // new to save. The folder stays as it was unless save_initial wrote
    // step-0, and a resume of the same checkpoint is exactly as good.
    bool stop_before_first = false;
    if (control_.stop && stop_agreed(*control_.stop, comm_)) {
      stop_before_first = true;
      result.outcome = RunOutcome::kStopped;
      trace.flush(allocator.tags());
    }

    const auto run_start = std::chrono::steady_clock::now();
    TraceGrowth growth;
    NonFiniteCount nonfinite(s.max_nonfinite_steps);
    for (int64_t step = first_step; step < s.steps && !stop_before_first; ++step) {
      step_now = step;
      // next_step(), keeping the plans: they say which bucket each is from.
      const std::vector<MicroBatchPlan> plans =
          std::move(batcher.next_step_plan()[static_cast<size_t>(s.layout.data_rank)]);
      std::vector<Batch> micro_batches;
      for (const MicroBatchPlan& plan : plans)
        micro_batches.push_back(batcher.build(plan));
      StepRecord record = trainer.step(step, micro_batches);
      const bool padded = s.batch.mode == BatchOptions::Mode::kPadded;
      if (padded && (!result.peak_shape || record.peak_allocated > result.peak_step_allocated)) {
        const MicroBatchPlan* costliest = &plans.front();
        for (const MicroBatchPlan& plan : plans)
          if (plan.tokens > costliest->tokens ||
              (plan.tokens == costliest->tokens && plan.width > costliest->width))
            costliest = &plan;
        result.peak_shape =
            RunResult::PeakShape{step, static_cast<int64_t>(costliest->documents.size()),
                                 costliest->width, costliest->bucket};
      }
      for (const MicroBatchPlan& plan : plans)
        result.largest_bucket_seen = std::max(result.largest_bucket_seen, plan.bucket);
      if (planning) {
        record.loss = std::numeric_limits<double>::quiet_NaN();
        record.grad_norm = std::numeric_limits<double>::quiet_NaN();
      }
      trace.append_step(record, phase_peaks_of_step(allocator.stats(), step, result.phase_peaks));
      commit();
      result.next_step = step + 1;
      result.last_loss = record.loss;
      result.peak_step_allocated = std::max(result.peak_step_allocated, record.peak_allocated);
      result.peak_step_reserved = std::max(result.peak_step_reserved, record.peak_reserved);
      result.longest_sample = std::max(result.longest_sample, record.longest_sample);
      result.padded_tokens_sum += record.padded_tokens;
      result.longest_sample_sum += record.longest_sample;
      result.step_allocations_sum += trainer.last_step_allocations();
      const bool last = step + 1 == s.steps;
      if ((step + 1) % s.flush_every == 0 || last) {
        trace.flush(allocator.tags());
        growth.check(current_trace_path(), step + 1 - first_step, s.steps - first_step);
      }
      const bool checkpoint_due =
          (s.save_every > 0 && (step + 1) % s.save_every == 0) || (s.resume_auto && last);
      if (saving && checkpoint_due) save(step + 1);

      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
      observer.on_step(
          StepReport{record, first_step, s.steps, elapsed, allocator.stats().peak_allocated});
      if (!planning) {
        result.message = nonfinite.after(record, trainer.overflowed());
        if (!result.message.empty()) {
          result.outcome = RunOutcome::kNonFinite;
          break;
        }
      }
      // A stop request ends the run after this step, resumably: the steps
      // so far are in the trace and, in a training, in a checkpoint.
      if (control_.stop && !last && stop_agreed(*control_.stop, comm_)) {
        if (!planning && !(saving && checkpoint_due)) save(step + 1);
        trace.flush(allocator.tags());
        result.outcome = RunOutcome::kStopped;
        break;
      }
    }
    if (result.outcome == RunOutcome::kFinished && !planning) {
      result.message = nonfinite.at_end();
      if (!result.message.empty()) result.outcome = RunOutcome::kNonFinite;
    }
  } catch (const OutOfMemory& oom) {
    commit();
    trace.flush(allocator.tags());
    trace.write_oom(oom.postmortem());
    result.outcome = RunOutcome::kOutOfMemory;
    result.oom = oom.postmortem();
    observer.on_out_of_memory(oom.postmortem(), trace_path.string());
  }
  // The steps that led to a non-finite stop are the evidence: keep them.
  if (result.outcome == RunOutcome::kNonFinite) trace.flush(allocator.tags());
  allocator.remove_observer(&trace);
  trace.close();
  result.committed = folder.committed();
  if (result.outcome == RunOutcome::kStopped && control_.stop)
    result.stop_signal = control_.stop->signal();

  result.memory = allocator.stats();
  if (host_allocator) result.host_memory = host_allocator->stats();
  const bool completed =
      result.outcome == RunOutcome::kFinished || result.outcome == RunOutcome::kStopped;
  if (measure_rss && completed) {
    // Offloaded states are host memory too: the resident set holds both.
    RssCheck rss;
    rss.baseline = rss_baseline;
    rss.peak_above_baseline = peak_resident_bytes() - rss_baseline;
    const uint64_t file_now = resident_file_bytes();
    rss.file_backed_growth = std::min(
        rss.peak_above_baseline, file_now > rss_file_baseline ? file_now - rss_file_baseline : 0);
    rss.private_peak_above_baseline = rss.peak_above_baseline - rss.file_backed_growth;
    rss.allocator_peak_reserved =
        allocator.peak_reserved() + (host_allocator ? host_allocator->peak_reserved() : 0);
    result.rss = rss;
  }
  observer.on_finished(result);
  return result;
}

}  // namespace headroom
