// render_perfetto: Chrome's trace-event JSON (what ui.perfetto.dev and
// chrome://tracing load). Per rank (pid = rank): a counter track per
// category that held bytes, plus allocated and reserved, sampled at the
// timeline's buckets (each bucket's maximum, so a track's maximum is the
// category's peak); on thread 1 a slice per step holding a slice per phase;
// an instant event at the OOM. Timestamps are microseconds of the
// allocator's steady clock.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "report/run_report.h"

namespace headroom {

namespace {

using nlohmann::json;

double us(int64_t t_ns) {
  return static_cast<double>(t_ns) / 1000.0;
}

std::string step_name(int64_t step) {
  return step < 0 ? std::string("init") : "step " + std::to_string(step);
}

void counters(const TraceReport& r, int pid, json& out) {
  // Each track is written only when its value changes.
  std::map<std::string, uint64_t> last;
  auto emit = [&](const std::string& name, int64_t t_ns, uint64_t value) {
    auto it = last.find(name);
    if (it != last.end() && it->second == value) return;
    last[name] = value;
    out.push_back({{"ph", "C"},
                   {"name", name},
                   {"pid", pid},
                   {"ts", us(t_ns)},
                   {"args", {{"bytes", value}}}});
  };
  for (const TimelineBucket& b : r.timeline) {
    for (Category c : kAllCategories) {
      int i = static_cast<int>(c);
      if (r.replay.peak_by_category[i] == 0) continue;
      emit(std::string(name_of(c)), b.t_begin_ns, b.category_max[i]);
    }
    emit("allocated", b.t_begin_ns, b.allocated_max);
    emit("reserved", b.t_begin_ns, b.reserved_max);
  }
}

json step_args(const TraceReport& r, int64_t step) {
  auto it = std::find_if(r.steps.begin(), r.steps.end(),
                         [&](const StepRecord& s) { return s.step == step; });
  if (it == r.steps.end()) return json::object();
  json args = {{"tokens", it->tokens},
               {"padded_tokens", it->padded_tokens},
               {"longest_sample", it->longest_sample},
               {"peak_allocated", it->peak_allocated},
               {"peak_reserved", it->peak_reserved},
               {"skipped", it->skipped}};
  if (!r.is_plan()) args["loss"] = it->loss;
  return args;
}

void slices(const TraceReport& r, int pid, json& out) {
  constexpr int kTid = 1;
  if (r.phases.empty()) {
    // No events (trace.memory_events = false): the steps laid end to end by
    // their wall time.
    double t = 0;
    for (const StepRecord& s : r.steps) {
      out.push_back({{"ph", "X"},
                     {"name", step_name(s.step)},
                     {"pid", pid},
                     {"tid", kTid},
                     {"ts", t},
                     {"dur", s.step_seconds * 1e6},
                     {"args", step_args(r, s.step)}});
      t += s.step_seconds * 1e6;
    }
    return;
  }
  for (size_t i = 0; i < r.phases.size();) {
    size_t end = i;
    while (end < r.phases.size() && r.phases[end].step == r.phases[i].step)
      ++end;
    const int64_t t0 = r.phases[i].t_begin_ns, t1 = r.phases[end - 1].t_end_ns;
    out.push_back({{"ph", "X"},
                   {"name", step_name(r.phases[i].step)},
                   {"cat", "step"},
                   {"pid", pid},
                   {"tid", kTid},
                   {"ts", us(t0)},
                   {"dur", us(t1 - t0)},
                   {"args", step_args(r, r.phases[i].step)}});
    for (; i < end; ++i) {
      const PhaseSpan& s = r.phases[i];
      out.push_back({{"ph", "X"},
                     {"name", std::string(name_of(s.phase))},
                     {"cat", "phase"},
                     {"pid", pid},
                     {"tid", kTid},
                     {"ts", us(s.t_begin_ns)},
                     {"dur", us(s.t_end_ns - s.t_begin_ns)},
                     {"args",
                      {{"step", s.step},
                       {"events", s.seq_end - s.seq_begin},
                       {"allocs", s.allocs},
                       {"largest_alloc", s.largest_alloc},
                       {"largest_tag", s.largest_tag}}}});
    }
  }
}

void oom_instant(const TraceReport& r, int pid, json& out) {
  if (!r.oom) return;
  int64_t t = r.oom_seq ? r.oom_t_ns : (r.timeline.empty() ? 0 : r.timeline.back().t_end_ns);
  json args = json::object();
  for (const ReportField& f : oom_fields(r))
    args[f.key] = f.value;
  out.push_back({{"ph", "i"},
                 {"s", "p"},
                 {"name", "OOM: " + r.oom->tag},
                 {"pid", pid},
                 {"tid", 1},
                 {"ts", us(t)},
                 {"args", std::move(args)}});
}

}  // namespace

std::string render_perfetto(const RunReport& run) {
  json events = json::array();
  // pid = rank; a folder's plan beside its run gets pids 10000 + rank.
  const bool mixed = std::any_of(run.traces.begin(), run.traces.end(),
                                 [](const TraceReport& t) { return t.is_plan(); }) &&
                     std::any_of(run.traces.begin(), run.traces.end(),
                                 [](const TraceReport& t) { return !t.is_plan(); });
  for (const TraceReport& r : run.traces) {
    const int pid = r.header.rank + (mixed && r.is_plan() ? 10000 : 0);
    const std::string kind = r.is_plan() ? "plan" : "run";
    events.push_back(
        {{"ph", "M"},
         {"name", "process_name"},
         {"pid", pid},
         {"args",
          {{"name", r.header.run_name + " " + kind + " rank " + std::to_string(r.header.rank)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", 1},
                      {"args", {{"name", "steps and phases"}}}});
    counters(r, pid, events);
    slices(r, pid, events);
    oom_instant(r, pid, events);
  }
  json j = {{"traceEvents", std::move(events)},
            {"displayTimeUnit", "ms"},
            {"otherData", {{"source", run.source}, {"generator", "headroom report --perfetto"}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace headroom
