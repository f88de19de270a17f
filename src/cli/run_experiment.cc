#include "run_experiment.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "backend/backend.h"
#include "config/config.h"
#include "embedded_quickstart.h"
#include "report/summary.h"
#include "stand_in_workload.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "util/bytes.h"
#include "util/error.h"

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
      "run.backend = \"cuda\": this build has no cuda backend for train yet (the transformer "
      "and its cuda ops arrive with the model issue); use run.backend = \"cpu\", or "
      "`headroom plan` to plan a cuda run's memory");
}

// Writes `text` to `path` through a temporary file and a rename, so a crash
// never leaves a half-written config beside a good trace.
void write_atomically(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UsageError(tmp.string() + ": cannot write");
    out << text;
    if (!out.flush()) throw UsageError(tmp.string() + ": write failed");
  }
  fs::rename(tmp, path);
}

std::string eta(double seconds) {
  char buf[32];
  int s = static_cast<int>(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

}  // namespace

int run_experiment(const RunOptions& options, RunMode mode) {
  const ExperimentConfig config = load(options);
  if (options.print_config) {
    std::fputs(to_toml(config).c_str(), stdout);
    return 0;
  }
  const BackendKind kind = backend_for(config, mode);
  const char* verb = mode == RunMode::kPlan ? "plan" : "train";

  // Everything that can be refused is checked before the first byte is written.
  const fs::path run_dir = fs::path(config.run.out_dir) / config.run.name;
  const fs::path trace_path =
      run_dir / (mode == RunMode::kPlan ? "plan.rank0.h5" : "trace.rank0.h5");
  if (fs::exists(trace_path) && !options.overwrite)
    throw UsageError(trace_path.string() +
                     ": exists from an earlier run; pass --overwrite to replace it, or choose "
                     "another name with --set run.name=<name>");
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw UsageError(run_dir.string() + ": cannot create run folder: " + ec.message());
  const std::string config_toml = to_toml(config);
  write_atomically(run_dir / (mode == RunMode::kPlan ? "plan.config.toml" : "config.toml"),
                   config_toml);

  AllocatorOptions allocator_options;
  allocator_options.capacity = config.memory.device_capacity;
  allocator_options.policy = config.memory.allocator == MemorySection::Allocator::kExact
                                 ? AllocatorPolicy::kExact
                                 : AllocatorPolicy::kCaching;
  Allocator allocator(source_for(kind), allocator_options);
  std::unique_ptr<Backend> backend =
      kind == BackendKind::kMeta ? make_meta_backend(allocator) : make_cpu_backend(allocator);

  TraceHeader header;
  header.run_name = config.run.name;
  header.backend = std::string(name_of(kind));
  header.device = kind == BackendKind::kMeta ? "meta (virtual)" : "cpu";
  header.capacity_bytes = config.memory.device_capacity;
  header.config_toml = config_toml;
  TraceWriter trace(trace_path.string(), header, config.trace.memory_events);
  allocator.add_observer(&trace);

  StandInShape shape;
  shape.tokens = config.batch.max_tokens_per_micro_batch;
  shape.dtype = config.model.dtype == Precision::kBf16 ? DType::kBF16 : DType::kF32;

  std::printf(
      "headroom %s: the transformer is not built yet (model issue); this run drives the "
      "stand-in workload\n  (%lld linear layers of %lldx%lld and a %lldx%lld head, %lld tokens "
      "per step, %s)\n  through the %s allocator and the trace, for %lld steps. Loss is not "
      "computed (NaN).\n",
      verb, static_cast<long long>(shape.layers), static_cast<long long>(shape.width),
      static_cast<long long>(shape.width), static_cast<long long>(shape.vocab),
      static_cast<long long>(shape.width), static_cast<long long>(shape.tokens),
      std::string(name_of(shape.dtype)).c_str(),
      config.memory.allocator == MemorySection::Allocator::kExact ? "exact" : "caching",
      static_cast<long long>(config.run.steps));

  int exit_code = 0;
  try {
    StandInWorkload workload(*backend, shape, static_cast<uint64_t>(config.model.seed));
    const auto run_start = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < config.run.steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      allocator.set_step(step);
      allocator.reset_peaks();
      workload.step(step);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

      StepRecord record;
      record.step = step;
      record.loss = std::numeric_limits<double>::quiet_NaN();
      record.grad_norm = std::numeric_limits<double>::quiet_NaN();
      record.tokens = shape.tokens;
      record.padded_tokens = shape.tokens;
      record.micro_batches = 1;
      record.longest_sample = shape.tokens;
      record.peak_allocated = allocator.peak_allocated();
      record.peak_reserved = allocator.peak_reserved();
      record.step_seconds = seconds;
      record.tokens_per_second = seconds > 0 ? static_cast<double>(shape.tokens) / seconds : 0;
      std::vector<PhasePeakRecord> peaks;
      for (Phase phase : kAllPhases) {
        uint64_t peak_allocated =
            allocator.stats().peak_allocated_by_phase[static_cast<int>(phase)];
        if (peak_allocated == 0) continue;
        peaks.push_back(
            PhasePeakRecord{step, phase, peak_allocated,
                            allocator.stats().peak_reserved_by_phase[static_cast<int>(phase)]});
      }
      trace.append_step(record, peaks);
      if ((step + 1) % config.trace.flush_every == 0 || step + 1 == config.run.steps)
        trace.flush(allocator.tags());

      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
      const double remaining = elapsed / static_cast<double>(step + 1) *
                               static_cast<double>(config.run.steps - step - 1);
      std::printf("step %lld/%lld  %.0f tok/s  peak %s allocated, %s reserved  eta %s\n",
                  static_cast<long long>(step + 1), static_cast<long long>(config.run.steps),
                  record.tokens_per_second, format_bytes(record.peak_allocated).c_str(),
                  format_bytes(record.peak_reserved).c_str(), eta(remaining).c_str());
      std::fflush(stdout);
    }
  } catch (const OutOfMemory& oom) {
    trace.flush(allocator.tags());
    trace.write_oom(oom.postmortem());
    std::fprintf(stderr, "%s", format_postmortem(oom.postmortem()).c_str());
    std::fprintf(stderr, "postmortem written to %s (/oom)\n", trace_path.string().c_str());
    exit_code = static_cast<int>(ExitCode::kOutOfMemory);
  }
  allocator.remove_observer(&trace);
  trace.close();

  // After an OOM the postmortem above is the message; the summary would
  // repeat it. `headroom report` shows both on demand.
  if (exit_code == 0)
    std::printf("\n%s", summarize_trace(TraceReader::open(trace_path.string())).c_str());
  return exit_code;
}

}  // namespace headroom
