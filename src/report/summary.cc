#include "report/summary.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "memory/postmortem.h"
#include "report/run_report.h"
#include "util/bytes.h"

namespace headroom {

namespace {

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string line(const std::string& label, const std::string& value) {
  return pad(label, 12) + value + "\n";
}

std::string format_number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

size_t count_lines(const std::string& text) {
  if (text.empty()) return 0;
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  return text.back() == '\n' ? lines : lines + 1;
}

std::string summarize_header(const TraceReport& trace) {
  const TraceHeader& h = trace.header;
  std::string out;
  out += line("trace", trace.path);
  out +=
      line("schema", std::to_string(h.schema_version) + " (headroom " + h.headroom_version + ")");
  out += line("run", h.run_name.empty() ? std::string("(unnamed)") : h.run_name);
  out += line("rank", std::to_string(h.rank) + " of " + std::to_string(h.world_size));
  out += line("backend", h.backend + ", device " + (h.device.empty() ? "(unknown)" : h.device));
  out += line("capacity", h.capacity_bytes == 0 ? std::string("unlimited (the source's own limit)")
                                                : format_bytes_exact(h.capacity_bytes));
  out += line("started", h.started_at);
  size_t config_lines = count_lines(h.config_toml);
  out += line("config", config_lines == 0 ? std::string("(not recorded)")
                                          : std::to_string(config_lines) +
                                                " lines of TOML in attribute /config_toml");
  return out;
}

std::string summarize_steps(const TraceReport& trace) {
  const std::vector<StepRecord>& steps = trace.steps;
  if (steps.empty()) return line("steps", "0 (no step finished)");
  const StepRecord& last = steps.back();
  auto skipped =
      std::count_if(steps.begin(), steps.end(), [](const StepRecord& s) { return s.skipped; });
  std::string text = std::to_string(steps.size()) + ", last: step " + std::to_string(last.step);
  // A plan (the meta backend) computes no math: it has no loss to show.
  if (!trace.is_plan()) text += ", loss " + format_number(last.loss);
  if (skipped > 0) text += ", " + std::to_string(skipped) + " skipped (non-finite)";
  int64_t targets = 0, processed = 0, truncated = 0, longest = 0;
  for (const StepRecord& s : steps) {
    targets += s.tokens;
    processed += s.padded_tokens;
    truncated += s.truncated_samples;
    longest = std::max(longest, s.longest_sample);
  }
  // What the batches cost: tokens the model ran over (padding included)
  // against the tokens that carried a loss.
  std::string data = std::to_string(processed) + " processed, " + std::to_string(targets) +
                     " with a target, longest sample " + std::to_string(longest);
  if (truncated > 0) data += ", " + std::to_string(truncated) + " samples truncated";
  return line("steps", text) + line("tokens", data);
}

std::string summarize_memory(const TraceReport& trace) {
  if (!trace.events_recorded)
    return line("memory", "no events recorded (the run had trace.memory_events = false)");
  if (trace.num_events == 0) return line("memory", "no events recorded (0 events in the trace)");

  const MemoryReplay& replay = trace.replay;
  std::string out;
  size_t tags = trace.num_tags;
  out += line("memory", std::to_string(replay.events) + " events replayed, " +
                            std::to_string(tags) + (tags == 1 ? " tag" : " tags"));
  out += "  " + pad("peak allocated", 16) + format_bytes_exact(replay.peak_allocated) + "\n";
  out += "  " + pad("peak reserved", 16) + format_bytes_exact(replay.peak_reserved) + "\n";
  out += "  " + pad("at the end", 16) + format_bytes_exact(replay.final_allocated) +
         " allocated, " + format_bytes_exact(replay.final_reserved) + " reserved\n";
  if (replay.unmatched_frees > 0)
    out += "  note: " + std::to_string(replay.unmatched_frees) +
           " frees had no matching alloc in the trace; the peaks are lower bounds\n";

  out += "\n  " + pad("category", 13) + pad("peak", 32) + "at peak allocated\n";
  for (Category c : kAllCategories) {
    int i = static_cast<int>(c);
    if (replay.peak_by_category[i] == 0) continue;  // never allocated: noise in the table
    out += "  " + pad(std::string(name_of(c)), 13) +
           pad(format_bytes_exact(replay.peak_by_category[i]), 32) +
           format_bytes_exact(replay.at_peak_by_category[i]) + "\n";
  }
  return out;
}

}  // namespace

void LiveCounters::apply(const MemoryEvent& e) {
  auto take = [this](uint64_t& from, uint64_t bytes) {
    if (bytes > from) {
      ++unmatched_frees;
      from = 0;
    } else {
      from -= bytes;
    }
  };
  int c = static_cast<int>(e.category);
  switch (e.action) {
    case MemoryAction::kAlloc:
      allocated += e.bytes;
      live[c] += e.bytes;
      break;
    case MemoryAction::kFree:
      take(allocated, e.bytes);
      // Both counters move together; count a mismatch once, not twice.
      live[c] = e.bytes > live[c] ? 0 : live[c] - e.bytes;
      break;
    case MemoryAction::kSegmentAlloc:
      reserved += e.bytes;
      break;
    case MemoryAction::kSegmentFree:
      take(reserved, e.bytes);
      break;
    case MemoryAction::kOom:
      break;  // the request that failed was never allocated
  }
}

MemoryReplay replay_memory_events(const TraceReader& trace, uint64_t batch_rows) {
  MemoryReplay r;
  LiveCounters now;
  trace.for_each_event_batch(
      [&](const std::vector<MemoryEvent>& batch) {
        for (const MemoryEvent& e : batch) {
          ++r.events;
          now.apply(e);
          int c = static_cast<int>(e.category);
          r.peak_by_category[c] = std::max(r.peak_by_category[c], now.live[c]);
          if (now.allocated > r.peak_allocated) {
            r.peak_allocated = now.allocated;
            r.at_peak_by_category = now.live;
          }
          r.peak_reserved = std::max(r.peak_reserved, now.reserved);
        }
      },
      batch_rows);
  r.final_allocated = now.allocated;
  r.final_reserved = now.reserved;
  r.unmatched_frees = now.unmatched_frees;
  return r;
}

std::string render_text(const TraceReport& trace) {
  std::string out = summarize_header(trace);
  out += summarize_steps(trace);
  out += summarize_memory(trace);
  if (trace.oom) {
    out += "\n" + format_postmortem(*trace.oom);
    std::string label;
    for (const ReportField& f : trace.oom_advice) {
      if (f.label != label) out += "\n  " + f.label + ":\n";
      label = f.label;
      out += "    " + f.value + "\n";
    }
  }
  return out;
}

std::string render_text(const RunReport& run) {
  std::string out;
  for (size_t i = 0; i < run.traces.size(); ++i) {
    if (i) out += "\n";
    out += render_text(run.traces[i]);
  }
  if (run.traces.size() < 2) return out;
  // One line per trace: the ranks side by side, so a rank whose batches (or
  // an OOM) set it apart stands out.
  out += "\ntraces side by side:\n";
  char text[256];
  std::snprintf(text, sizeof text, "  %-32s %-9s %6s %-14s %-14s %s\n", "file", "rank", "steps",
                "peak alloc", "peak reserved", "longest sample / OOM");
  out += text;
  for (const TraceReport& trace : run.traces) {
    uint64_t allocated = 0, reserved = 0;
    int64_t longest = 0;
    for (const StepRecord& step : trace.steps) {
      allocated = std::max(allocated, step.peak_allocated);
      reserved = std::max(reserved, step.peak_reserved);
      longest = std::max(longest, step.longest_sample);
    }
    std::string last = std::to_string(longest);
    if (trace.oom)
      last =
          "OUT OF MEMORY at step " + std::to_string(trace.oom->step) + " (" + trace.oom->tag + ")";
    const std::string rank =
        std::to_string(trace.header.rank) + "/" + std::to_string(trace.header.world_size);
    const std::string file = trace.path.substr(trace.path.find_last_of('/') + 1);
    std::snprintf(text, sizeof text, "  %-32s %-9s %6zu %-14s %-14s %s\n", file.c_str(),
                  rank.c_str(), trace.steps.size(), format_bytes(allocated).c_str(),
                  format_bytes(reserved).c_str(), last.c_str());
    out += text;
  }
  return out;
}

std::string summarize_trace(const TraceReader& trace) {
  return render_text(build_trace_report(trace));
}

}  // namespace headroom
