// The report model: everything `headroom report` shows about a run, read
// once from its traces (one per rank, or a plan's), so that the text summary,
// the JSON, the HTML page, the Perfetto export and the comparison of two runs
// all render the same figures. Building it reads /memory/events twice
// (streamed, never all held): once for the peaks, once for the downsampled
// timeline and the blocks live at the peak.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory/category.h"
#include "memory/postmortem.h"
#include "report/summary.h"
#include "trace/reader.h"
#include "trace/records.h"

namespace headroom {

// A run of consecutive allocator events [seq_begin, seq_end) of one step,
// reduced to its envelope. Outside the detail steps a bucket covers many
// events (about kTimelineBuckets over the whole trace, never across a step
// boundary); inside them (the peak step, the OOM step) it covers a few or one.
struct TimelineBucket {
  uint64_t seq_begin = 0, seq_end = 0;  // event rows, end exclusive
  int64_t t_begin_ns = 0, t_end_ns = 0;
  int64_t step = -1;
  Phase phase = Phase::kInit;  // of the bucket's first event
  uint64_t allocated_min = 0, allocated_max = 0;
  uint64_t reserved_min = 0, reserved_max = 0;
  // Live bytes per category at the bucket's allocated_max (a consistent
  // snapshot: it sums to allocated_max, so it can be stacked).
  std::array<uint64_t, kNumCategories> at_max{};
  // Each category's own highest value inside the bucket (so the maximum over
  // buckets is exactly the category's peak).
  std::array<uint64_t, kNumCategories> category_max{};
};

// Consecutive events of one (step, phase): what Perfetto shows as a slice
// and the timeline as a band.
struct PhaseSpan {
  int64_t step = -1;
  Phase phase = Phase::kInit;
  uint64_t seq_begin = 0, seq_end = 0;
  int64_t t_begin_ns = 0, t_end_ns = 0;  // first event, and the next span's first (or last event)
  uint64_t allocs = 0;
  uint64_t largest_alloc = 0;  // bytes of the span's largest allocation ...
  std::string largest_tag;     // ... and its tag
};

// A block live at the moment of the peak.
struct PeakBlock {
  uint64_t bytes = 0;
  std::string tag;
  Category category = Category::kWorkspace;
  Phase phase = Phase::kInit;  // when it was allocated
  int32_t layer = -1;
  int64_t step = -1;
};

// One label/value line of a section, for sections whose fields grow (the
// OOM postmortem: a later /oom/advice adds lines, not code in each renderer).
struct ReportField {
  std::string key;    // machine name, e.g. "requested_bytes" (JSON key)
  std::string label;  // what a person reads, e.g. "requested"
  std::string value;  // as shown, e.g. "970.0 MiB (1017118720 B)"
};

// One rank's trace (train or plan).
struct TraceReport {
  std::string path;
  TraceHeader header;
  std::vector<StepRecord> steps;
  std::vector<PhasePeakRecord> phase_peaks;
  size_t num_tags = 0;
  bool events_recorded = true;
  uint64_t num_events = 0;
  MemoryReplay replay;  // peaks replayed from the events
  // Where peak_allocated was first reached: the event row and its step/time.
  uint64_t peak_seq = 0;
  int64_t peak_step = -1;
  int64_t peak_t_ns = 0;
  std::vector<TimelineBucket> timeline;
  std::vector<PhaseSpan> phases;
  std::vector<PeakBlock> peak_blocks;  // live at the peak, largest first
  std::optional<Postmortem> oom;
  // The seq of the failed request's `oom` event, when the events hold one.
  std::optional<uint64_t> oom_seq;
  int64_t oom_t_ns = 0;
  // /oom/advice (advice/advice.h): why it ran out and what would fit, as
  // lines; empty when the trace has none.
  std::vector<ReportField> oom_advice;

  bool is_plan() const { return header.backend == "meta"; }
  // The steps whose events the timeline keeps in full detail.
  std::vector<int64_t> detail_steps() const;
};

// A run: its traces in rank order (a run folder's trace.rank<R>.h5, or its
// plan.rank<R>.h5, or one file).
struct RunReport {
  std::string source;  // the argument: a folder or a file
  std::vector<TraceReport> traces;
};

// Buckets the timeline aims at outside the detail steps, and the most it
// keeps inside them (where a step has more events, buckets there grow too).
inline constexpr uint64_t kTimelineBuckets = 2000;
inline constexpr uint64_t kDetailBuckets = 12000;

// Reads one trace. Throws what TraceReader throws (UsageError naming the
// file for a damaged one).
TraceReport build_trace_report(const TraceReader& trace);

// Which traces of a run folder: all (plans, then runs, each in rank order),
// only the plans (plan.rank<R>.h5) or only the runs (trace.rank<R>.h5), or
// the runs when there are any and else the plans (for comparing folders).
enum class TraceSelection { kAll, kPlans, kRuns, kRunsElsePlans };

// The traces of `target`: a trace file (whatever `select`), or a run
// folder's traces. Throws UsageError naming `target` when there is nothing
// to read.
std::vector<std::string> traces_of(const std::string& target,
                                   TraceSelection select = TraceSelection::kAll);
RunReport build_run_report(const std::string& target, TraceSelection select = TraceSelection::kAll);

// The postmortem as label/value lines, in the order the page shows them.
std::vector<ReportField> postmortem_fields(const Postmortem& pm);

// The OOM section's lines: the postmortem's, then its advice's.
std::vector<ReportField> oom_fields(const TraceReport& trace);

// /oom/advice's JSON as lines: "why" (one per finding), "cheapest that
// fits", one per change that fits, one per change still out of memory.
std::vector<ReportField> advice_fields(const std::string& advice_json);

// Peak allocated per phase over all steps (index = Phase), from
// /memory/phase_peaks.
std::array<uint64_t, kNumPhases> peak_by_phase(const TraceReport& trace);

// The renderings. Each is a pure function of the model.
std::string render_text(const TraceReport& trace);  // today's `headroom report` text
std::string render_text(const RunReport& run);      // every trace, then ranks side by side
std::string render_json(const RunReport& run);      // indented JSON (docs/report.md)
std::string render_html(const RunReport& run);      // one self-contained page
std::string render_perfetto(const RunReport& run);  // Chrome trace-event JSON

// `headroom report A B`: config differences, per-category and per-phase
// peaks side by side with deltas, and the first event where two traces
// (e.g. a plan and its run) part.
std::string render_comparison(const RunReport& a, const RunReport& b);

}  // namespace headroom
