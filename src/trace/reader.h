// TraceReader: reads back what TraceWriter wrote (schema v1, docs/trace.md),
// for `headroom report` and the tests. Read-only; it also opens the file of a
// run that was killed, or of a live run (as of that run's last flush).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory/event.h"
#include "memory/postmortem.h"
#include "trace/records.h"

namespace headroom {

class TraceReader {
 public:
  // Opens `path` and reads the root attributes. Throws UsageError
  //  "<path>: cannot open trace: <strerror>"            (missing, unreadable)
  //  "<path>: not a headroom trace (<why>)"            (not HDF5, no schema, ...)
  //  "<path>: trace schema version N is newer than ..." (written by a newer headroom)
  static TraceReader open(const std::string& path);

  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  const std::string& path() const;
  const TraceHeader& header() const;

  // Each read below throws UsageError "<path>: cannot read <table>: <reason>"
  // for a damaged file.
  std::vector<StepRecord> steps() const;
  uint64_t num_steps() const;
  std::vector<PhasePeakRecord> phase_peaks() const;
  // index = MemoryEvent::tag_id. After a kill inside a flush the newest
  // tags' strings may point past the file's end (HDF5 keeps variable-length
  // strings in a heap the torn flush did not finish): then the longest
  // readable prefix, which holds every tag of the flushes that completed.
  std::vector<std::string> tags() const;

  // False when the run had trace.memory_events off (then events are empty).
  bool events_recorded() const;
  uint64_t num_events() const;
  std::vector<MemoryEvent> events() const;
  // Streams /memory/events in seq order, `batch_rows` at a time, so a replay
  // over hundreds of millions of events does not hold them all in memory.
  // Rows whose action/category/phase are out of range throw UsageError.
  void for_each_event_batch(const std::function<void(const std::vector<MemoryEvent>&)>& consume,
                            uint64_t batch_rows = uint64_t{1} << 20) const;
  // Rows [start, start + count) of /memory/events, clamped to the table (so
  // fewer, or none, past its end); checked like for_each_event_batch.
  std::vector<MemoryEvent> read_events(uint64_t start, uint64_t count) const;

  // The message of /collective_timeout (a collective that did not complete
  // in run.collective_timeout); nullopt when the trace has none.
  std::optional<std::string> collective_timeout() const;

  bool has_oom() const;
  // The postmortem stored in /oom. Throws UsageError when there is none.
  Postmortem oom() const;

 private:
  struct Impl;
  explicit TraceReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom
