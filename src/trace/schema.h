// Internal to src/trace: the HDF5 side of schema v1 (docs/trace.md) — object
// names, the in-memory row layouts, and the HDF5 types of each table. Writer
// and reader build their types here, so the two cannot drift apart.
#pragma once

#include <cstdint>

#include "memory/category.h"
#include "memory/event.h"
#include "util/hdf5/hdf5_handle.h"

namespace headroom::trace_detail {

inline constexpr const char* kStepsTable = "/steps";
inline constexpr const char* kMemoryGroup = "/memory";
inline constexpr const char* kEventsTable = "/memory/events";
inline constexpr const char* kTagsTable = "/memory/tags";
inline constexpr const char* kPhasePeaksTable = "/memory/phase_peaks";
inline constexpr const char* kOomGroup = "/oom";
// A collective that did not complete in run.collective_timeout: attribute
// "message" says which, over which group, at which step and phase.
inline constexpr const char* kCollectiveTimeoutGroup = "/collective_timeout";
inline constexpr const char* kTopBlocksTable = "/oom/top_blocks";
inline constexpr const char* kLiveByCategoryTable = "/oom/live_by_category";

// Rows per chunk. Events: 16 Ki rows x 51 B = 816 KiB per chunk, so
// millions of events make a few hundred chunks (a small B-tree), and the
// partly filled last chunk that each flush rewrites stays under 1 MiB.
// Steps and phase peaks: a run has thousands of rows, not millions.
inline constexpr hsize_t kEventChunkRows = 16 * 1024;
inline constexpr hsize_t kTagChunkRows = 1024;
inline constexpr hsize_t kStepChunkRows = 256;
inline constexpr hsize_t kPhasePeakChunkRows = 1024;

// /steps as it sits in memory (StepRecord with the bool as h5py's int8 enum).
struct StepRow {
  int64_t step;
  double loss;
  double grad_norm;
  double lr;
  int64_t tokens;
  int64_t padded_tokens;
  int64_t micro_batches;
  int64_t longest_sample;
  uint64_t peak_allocated;
  uint64_t peak_reserved;
  double step_seconds;
  double tokens_per_second;
  int8_t skipped;
  int64_t truncated_samples;
  double padding_fraction;  // older traces lack it (step_mem_before_padding)
  double loss_scale;        // last: older traces lack it (step_mem_before_loss_scale)
};

struct PhasePeakRow {
  int64_t step;
  Phase phase;
  uint64_t peak_allocated;
  uint64_t peak_reserved;
};

// /oom/top_blocks; `tag` points into a std::string (write) or HDF5-owned
// memory reclaimed after reading.
struct TopBlockRow {
  uint64_t bytes;
  const char* tag;
  Category category;
  Phase phase;
  int32_t layer;
  int64_t step;
};

struct LiveRow {
  Category category;
  uint64_t bytes;
};

// Every HDF5 type the trace uses. `*_mem` describe the structs above (and
// MemoryEvent itself); `*_file` are the same members packed, as stored.
struct TraceTypes {
  hdf5::Hid action;    // enum u8: alloc, free, segment_alloc, segment_free, oom
  hdf5::Hid category;  // enum u8: name_of(Category)
  hdf5::Hid phase;     // enum u8: name_of(Phase)
  hdf5::Hid boolean;   // enum i8 FALSE/TRUE: what h5py reads as numpy bool
  hdf5::Hid string;    // variable-length UTF-8
  hdf5::Hid event_mem, event_file;
  hdf5::Hid step_mem, step_file;
  // /steps of traces written before padding_fraction: StepRow less it and
  // loss_scale; before loss_scale: StepRow less it.
  hdf5::Hid step_mem_before_padding;
  hdf5::Hid step_mem_before_loss_scale;
  hdf5::Hid phase_peak_mem, phase_peak_file;
  hdf5::Hid top_block_mem, top_block_file;
  hdf5::Hid live_mem, live_file;
};

// Throws InternalError if HDF5 cannot build a type (a broken library).
TraceTypes make_trace_types();

}  // namespace headroom::trace_detail
