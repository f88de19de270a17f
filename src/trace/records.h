// What one rank's trace file holds, as plain C++ records. The HDF5 layout of
// each (schema v1) is in docs/trace.md; TraceWriter writes these and
// TraceReader gives them back unchanged.
#pragma once

#include <cstdint>
#include <string>

#include "memory/category.h"

namespace headroom {

// The schema this headroom writes. A reader refuses files with a larger one.
inline constexpr int32_t kTraceSchemaVersion = 1;

// Root attributes: who made the trace and with what configuration.
struct TraceHeader {
  std::string run_name;
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string backend;          // "cpu", "cuda", "meta"
  std::string device;           // e.g. "NVIDIA H200", "cpu"
  uint64_t capacity_bytes = 0;  // the allocator's capacity; 0 = the source's own limit
  // memory.device: the memory a rank holds outside the allocator, one
  // "<name> <bytes> <source>" line each (memory/device_preset.h); "" without
  // a preset. Attribute outside_allocator; absent in traces written before it.
  std::string outside_allocator;
  std::string config_toml;  // the resolved config, so a trace explains itself
  std::string started_at;   // ISO-8601 UTC; the writer fills it when empty
  std::string headroom_version = HEADROOM_VERSION;
  // The writer always writes kTraceSchemaVersion; the reader fills this in.
  int32_t schema_version = kTraceSchemaVersion;
};

// One row of /steps: one optimizer step.
struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  int64_t tokens = 0;         // real (loss-bearing) tokens in the step
  int64_t padded_tokens = 0;  // tokens processed including padding
  int64_t micro_batches = 0;
  int64_t longest_sample = 0;  // tokens, after truncation
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  double step_seconds = 0;
  double tokens_per_second = 0;
  bool skipped = false;           // non-finite loss or gradients: the update was not applied
  int64_t truncated_samples = 0;  // samples cut to data.max_sample_tokens in this step
  // Padding tokens / padded_tokens (0 when packed). NaN when read from a
  // trace written before the column existed (it cannot be recovered).
  double padding_fraction = 0;
  // The loss scale this step's gradients carried (optimizer.loss_scale; 1
  // without scaling, and in traces written before the column existed).
  double loss_scale = 1;

  bool operator==(const StepRecord&) const = default;
};

// One row of /memory/phase_peaks: the highest allocated/reserved seen while
// `phase` was current during `step`.
struct PhasePeakRecord {
  int64_t step = 0;
  Phase phase = Phase::kInit;
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;

  bool operator==(const PhasePeakRecord&) const = default;
};

// "2024-05-01T12:34:56Z": the current time, for TraceHeader::started_at.
std::string utc_now_iso8601();

}  // namespace headroom
