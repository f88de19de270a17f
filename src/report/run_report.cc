#include "report/run_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "trace/oom_advice.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

// A path as an error shows it: whole when it is a path a person typed, cut
// when it is 5000 characters a script got wrong.
std::string shown(const std::string& path) {
  constexpr size_t kShown = 200;
  if (path.size() <= kShown) return path;
  return path.substr(0, kShown) + "... (" + std::to_string(path.size()) + " characters)";
}

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

// Pass 1: the peaks (as replay_memory_events counts them), where the peak
// was first reached, the (step, phase) spans, the OOM event, and how many
// events each step has (which sizes pass 2's buckets).
struct FirstPass {
  std::unordered_map<int64_t, uint64_t> events_per_step;
};

FirstPass first_pass(const TraceReader& reader, const std::vector<std::string>& tags,
                     TraceReport& r) {
  FirstPass fp;
  MemoryReplay& replay = r.replay;
  LiveCounters now;
  PhaseSpan* span = nullptr;
  int64_t last_t = 0;
  auto close_span = [&](int64_t end_t) {
    if (span != nullptr) span->t_end_ns = end_t;
  };
  reader.for_each_event_batch([&](const std::vector<MemoryEvent>& batch) {
    for (const MemoryEvent& e : batch) {
      ++replay.events;
      ++fp.events_per_step[e.step];
      now.apply(e);
      int c = static_cast<int>(e.category);
      replay.peak_by_category[c] = std::max(replay.peak_by_category[c], now.live[c]);
      if (now.allocated > replay.peak_allocated) {
        replay.peak_allocated = now.allocated;
        replay.at_peak_by_category = now.live;
        r.peak_seq = e.seq;
        r.peak_step = e.step;
        r.peak_t_ns = e.t_ns;
      }
      replay.peak_reserved = std::max(replay.peak_reserved, now.reserved);
      if (e.action == MemoryAction::kOom && !r.oom_seq) {
        r.oom_seq = e.seq;
        r.oom_t_ns = e.t_ns;
      }
      if (span == nullptr || span->step != e.step || span->phase != e.phase) {
        // Within a step a span runs to the next one's start; the step's last
        // span ends at the step's last event, so steps contain their phases.
        close_span(span != nullptr && span->step == e.step ? e.t_ns : last_t);
        span = &r.phases.emplace_back();
        span->step = e.step;
        span->phase = e.phase;
        span->seq_begin = e.seq;
        span->t_begin_ns = span->t_end_ns = e.t_ns;
      }
      span->seq_end = e.seq + 1;
      if (e.action == MemoryAction::kAlloc) {
        ++span->allocs;
        if (e.bytes > span->largest_alloc) {
          span->largest_alloc = e.bytes;
          span->largest_tag = e.tag_id < tags.size() ? tags[e.tag_id] : std::string();
        }
      }
      last_t = e.t_ns;
    }
  });
  close_span(last_t);
  replay.final_allocated = now.allocated;
  replay.final_reserved = now.reserved;
  replay.unmatched_frees = now.unmatched_frees;
  return fp;
}

struct LiveBlockRef {
  uint64_t bytes;
  uint32_t tag_id;
  Category category;
  Phase phase;
  int32_t layer;
  int64_t step;
};

// Pass 2: the bucketed timeline and the blocks live at the peak.
void second_pass(const TraceReader& reader, const std::vector<std::string>& tags,
                 const FirstPass& fp, TraceReport& r) {
  const std::vector<int64_t> detail = r.detail_steps();
  uint64_t detail_events = 0;
  for (int64_t step : detail) {
    auto it = fp.events_per_step.find(step);
    if (it != fp.events_per_step.end()) detail_events += it->second;
  }
  const uint64_t coarse = std::max<uint64_t>(
      1, ceil_div(r.replay.events - std::min(r.replay.events, detail_events), kTimelineBuckets));
  const uint64_t fine = std::max<uint64_t>(1, ceil_div(detail_events, kDetailBuckets));

  LiveCounters now;
  std::unordered_map<uint64_t, LiveBlockRef> live;  // by address
  TimelineBucket* bucket = nullptr;
  uint64_t in_bucket = 0, limit = coarse;
  reader.for_each_event_batch([&](const std::vector<MemoryEvent>& batch) {
    for (const MemoryEvent& e : batch) {
      now.apply(e);
      if (e.action == MemoryAction::kAlloc) {
        live[e.address] = {e.bytes, e.tag_id, e.category, e.phase, e.layer, e.step};
      } else if (e.action == MemoryAction::kFree) {
        live.erase(e.address);
      }
      if (bucket == nullptr || bucket->step != e.step || in_bucket == limit) {
        limit = std::find(detail.begin(), detail.end(), e.step) != detail.end() ? fine : coarse;
        bucket = &r.timeline.emplace_back();
        bucket->seq_begin = e.seq;
        bucket->t_begin_ns = e.t_ns;
        bucket->step = e.step;
        bucket->phase = e.phase;
        bucket->allocated_min = now.allocated;
        bucket->reserved_min = now.reserved;
        in_bucket = 0;
      }
      ++in_bucket;
      bucket->seq_end = e.seq + 1;
      bucket->t_end_ns = e.t_ns;
      bucket->allocated_min = std::min(bucket->allocated_min, now.allocated);
      bucket->reserved_min = std::min(bucket->reserved_min, now.reserved);
      bucket->reserved_max = std::max(bucket->reserved_max, now.reserved);
      if (now.allocated >= bucket->allocated_max) {
        bucket->allocated_max = now.allocated;
        bucket->at_max = now.live;
      }
      for (int c = 0; c < kNumCategories; ++c)
        bucket->category_max[c] = std::max(bucket->category_max[c], now.live[c]);
      if (e.seq == r.peak_seq && r.replay.peak_allocated > 0) {
        for (const auto& [address, b] : live)
          r.peak_blocks.push_back(PeakBlock{b.bytes, b.tag_id < tags.size() ? tags[b.tag_id] : "",
                                            b.category, b.phase, b.layer, b.step});
      }
    }
  });
  std::sort(r.peak_blocks.begin(), r.peak_blocks.end(), [](const PeakBlock& a, const PeakBlock& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.tag < b.tag;
  });
}

}  // namespace

std::vector<int64_t> TraceReport::detail_steps() const {
  std::vector<int64_t> out;
  if (replay.peak_allocated > 0) out.push_back(peak_step);
  if (oom && std::find(out.begin(), out.end(), oom->step) == out.end()) out.push_back(oom->step);
  return out;
}

TraceReport build_trace_report(const TraceReader& reader) {
  TraceReport r;
  r.path = reader.path();
  r.header = reader.header();
  r.steps = reader.steps();
  r.phase_peaks = reader.phase_peaks();
  const std::vector<std::string> tags = reader.tags();
  r.num_tags = tags.size();
  r.events_recorded = reader.events_recorded();
  r.num_events = reader.num_events();
  if (reader.has_oom()) {
    r.oom = reader.oom();
    if (const std::optional<std::string> advice = read_oom_advice(reader.path()))
      r.oom_advice = advice_fields(*advice);
  }
  FirstPass fp = first_pass(reader, tags, r);
  if (r.replay.events > 0) second_pass(reader, tags, fp, r);
  return r;
}

std::vector<std::string> traces_of(const std::string& target, TraceSelection select) {
  // The error_code overloads: a symlink loop or a name past NAME_MAX must be
  // a message naming the argument, not a filesystem_error (exit 1).
  std::error_code ec;
  const fs::file_status status = fs::status(target, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError(shown(target) + ": " + ec.message() + " (the report argument)");
  if (!fs::exists(status)) throw UsageError(shown(target) + ": no such file or folder");
  if (!fs::is_directory(status)) return {target};

  std::vector<std::string> runs, plans;
  fs::directory_iterator entries(target, ec);
  if (ec) throw UsageError(shown(target) + ": cannot list the folder: " + ec.message());
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".h5") continue;
    if (name.rfind("trace.rank", 0) == 0) runs.push_back(entry.path().string());
    if (name.rfind("plan.rank", 0) == 0) plans.push_back(entry.path().string());
  }
  // Rank order: trace.rank10 after trace.rank9.
  auto by_rank = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  };
  std::sort(runs.begin(), runs.end(), by_rank);
  std::sort(plans.begin(), plans.end(), by_rank);
  if (runs.empty() && plans.empty())
    throw UsageError(shown(target) + ": no trace.rank<R>.h5 or plan.rank<R>.h5 in this folder");
  switch (select) {
    case TraceSelection::kPlans:
      if (plans.empty()) throw UsageError(shown(target) + ": no plan.rank<R>.h5 in this folder");
      return plans;
    case TraceSelection::kRuns:
      if (runs.empty()) throw UsageError(shown(target) + ": no trace.rank<R>.h5 in this folder");
      return runs;
    case TraceSelection::kRunsElsePlans:
      return runs.empty() ? plans : runs;
    case TraceSelection::kAll:
      break;
  }
  plans.insert(plans.end(), runs.begin(), runs.end());
  return plans;
}

RunReport build_run_report(const std::string& target, TraceSelection select) {
  RunReport run;
  run.source = target;
  for (const std::string& path : traces_of(target, select))
    run.traces.push_back(build_trace_report(TraceReader::open(path)));
  return run;
}

std::vector<ReportField> postmortem_fields(const Postmortem& pm) {
  std::vector<ReportField> f;
  f.push_back({"tag", "tag", pm.tag.empty() ? "(untagged)" : pm.tag});
  if (!pm.description.empty()) f.push_back({"description", "shape", pm.description});
  f.push_back({"requested_bytes", "requested", format_bytes_exact(pm.requested_bytes)});
  f.push_back({"rounded_bytes", "after rounding", format_bytes_exact(pm.rounded_bytes)});
  f.push_back({"segment_bytes", "segment tried", format_bytes_exact(pm.segment_bytes)});
  f.push_back({"category", "category", std::string(name_of(pm.category))});
  f.push_back({"phase", "phase", std::string(name_of(pm.phase))});
  f.push_back({"layer", "layer", pm.layer >= 0 ? std::to_string(pm.layer) : "-"});
  f.push_back({"step", "step", pm.step >= 0 ? std::to_string(pm.step) : "init"});
  f.push_back({"allocated", "allocated", format_bytes_exact(pm.allocated)});
  f.push_back({"reserved", "reserved", format_bytes_exact(pm.reserved)});
  f.push_back({"capacity", "capacity",
               pm.capacity ? format_bytes_exact(pm.capacity) : "unlimited (the source's limit)"});
  f.push_back({"source", "source", pm.source});
  f.push_back({"capacity_limited", "refused by",
               pm.capacity_limited ? "memory.device_capacity" : "the " + pm.source + " source"});
  return f;
}

std::vector<ReportField> oom_fields(const TraceReport& trace) {
  std::vector<ReportField> f = postmortem_fields(*trace.oom);
  f.insert(f.end(), trace.oom_advice.begin(), trace.oom_advice.end());
  return f;
}

std::vector<ReportField> advice_fields(const std::string& advice_json) {
  std::vector<ReportField> f;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(advice_json);
  } catch (const nlohmann::json::exception&) {
    return {{"advice", "advice", "unreadable /oom/advice"}};
  }
  auto sets = [](const nlohmann::json& cf) {
    std::string out;
    for (const auto& o : cf.value("set", nlohmann::json::array()))
      out += (out.empty() ? "" : " ") + std::string("--set ") + o.get<std::string>();
    return out;
  };
  int i = 0;
  for (const auto& why : j.value("why", nlohmann::json::array()))
    f.push_back({"why." + std::to_string(i++), "why", why.get<std::string>()});
  const nlohmann::json fits = j.value("fits", nlohmann::json::array());
  if (!fits.empty()) f.push_back({"cheapest_fit", "cheapest that fits", sets(fits.front())});
  i = 0;
  for (const auto& cf : fits) {
    char extra[32];
    std::snprintf(extra, sizeof extra, "%+.0f%%", 100.0 * cf.value("extra_step_time", 0.0));
    f.push_back({"fits." + std::to_string(i++), "fits",
                 sets(cf) + ": peak reserved " +
                     format_bytes(cf.value("peak_reserved", uint64_t{0})) + ", step time " + extra +
                     ", " + cf.value("effect", std::string())});
  }
  i = 0;
  for (const auto& cf : j.value("not_fitting", nlohmann::json::array()))
    f.push_back({"not_fitting." + std::to_string(i++), "still out of memory",
                 sets(cf) + ": at " + cf.value("out_of_memory_at", std::string())});
  return f;
}

std::array<uint64_t, kNumPhases> peak_by_phase(const TraceReport& trace) {
  std::array<uint64_t, kNumPhases> out{};
  for (const PhasePeakRecord& p : trace.phase_peaks) {
    int i = static_cast<int>(p.phase);
    out[i] = std::max(out[i], p.peak_allocated);
  }
  return out;
}

}  // namespace headroom
