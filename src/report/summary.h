// The plain-text summary of one rank's trace: who ran what, how far it got,
// what memory peaked at and what that peak was made of, and the OOM
// postmortem if there was one. `headroom report` prints it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "memory/category.h"
#include "memory/event.h"
#include "trace/reader.h"

namespace headroom {

// Allocated/reserved bytes reconstructed by replaying /memory/events in seq
// order: alloc/free move allocated (overall and per category),
// segment_alloc/segment_free move reserved; oom events change nothing.
struct MemoryReplay {
  uint64_t events = 0;
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  std::array<uint64_t, kNumCategories> peak_by_category{};
  // Live bytes per category at the moment of peak_allocated (its first
  // occurrence): what the peak was made of.
  std::array<uint64_t, kNumCategories> at_peak_by_category{};
  // Bytes still allocated/reserved after the last event.
  uint64_t final_allocated = 0;
  uint64_t final_reserved = 0;
  // Frees of more bytes than were live (the trace began after some blocks
  // were made, or was cut); their bytes are clamped, so the peaks are lower
  // bounds. 0 for a complete trace.
  uint64_t unmatched_frees = 0;
};

// The replay's running state, one event at a time in seq order (what
// replay_memory_events and the report model share). A free of more bytes
// than are live clamps to 0 and counts in unmatched_frees.
struct LiveCounters {
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  std::array<uint64_t, kNumCategories> live{};
  uint64_t unmatched_frees = 0;
  void apply(const MemoryEvent& event);
};

// Streams the events `batch_rows` at a time (never holding them all); throws
// what TraceReader throws.
MemoryReplay replay_memory_events(const TraceReader& trace,
                                  uint64_t batch_rows = uint64_t{1} << 20);

// The whole summary, newline-terminated, e.g.
//   trace     results/qs/trace.rank0.h5 (schema 1, headroom 0.1.0)
//   run       quickstart, rank 0 of 1, backend cpu, device cpu
//   ...
//   memory    12034 events replayed
//     peak allocated  1.2 GiB (1288490188 B)
//     category     peak                        at peak allocated
//     param        ...
// Renders render_text(build_trace_report(trace)) (report/run_report.h).
std::string summarize_trace(const TraceReader& trace);

}  // namespace headroom
