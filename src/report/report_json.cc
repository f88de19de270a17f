// render_json: the report model as JSON (docs/report.md), for scripts and
// the sweep table. Series are columnar (one array per field), so 2000
// timeline buckets cost a few hundred kilobytes, not megabytes.
#include <cmath>
#include <nlohmann/json.hpp>

#include "report/run_report.h"

namespace headroom {

namespace {

using nlohmann::json;

json by_category(const std::array<uint64_t, kNumCategories>& bytes) {
  json out = json::object();
  for (Category c : kAllCategories)
    out[std::string(name_of(c))] = bytes[static_cast<int>(c)];
  return out;
}

// NaN (padding_fraction of an old trace) is not JSON: it becomes null.
json number(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

json steps_json(const std::vector<StepRecord>& steps) {
  json s = json::object();
  for (const char* k :
       {"step", "loss", "grad_norm", "lr", "tokens", "padded_tokens", "micro_batches",
        "longest_sample", "peak_allocated", "peak_reserved", "step_seconds", "tokens_per_second",
        "skipped", "truncated_samples", "padding_fraction", "loss_scale"})
    s[k] = json::array();
  for (const StepRecord& r : steps) {
    s["step"].push_back(r.step);
    s["loss"].push_back(number(r.loss));
    s["grad_norm"].push_back(number(r.grad_norm));
    s["lr"].push_back(number(r.lr));
    s["tokens"].push_back(r.tokens);
    s["padded_tokens"].push_back(r.padded_tokens);
    s["micro_batches"].push_back(r.micro_batches);
    s["longest_sample"].push_back(r.longest_sample);
    s["peak_allocated"].push_back(r.peak_allocated);
    s["peak_reserved"].push_back(r.peak_reserved);
    s["step_seconds"].push_back(number(r.step_seconds));
    s["tokens_per_second"].push_back(number(r.tokens_per_second));
    s["skipped"].push_back(r.skipped);
    s["truncated_samples"].push_back(r.truncated_samples);
    s["padding_fraction"].push_back(number(r.padding_fraction));
    s["loss_scale"].push_back(number(r.loss_scale));
  }
  return s;
}

json timeline_json(const std::vector<TimelineBucket>& timeline) {
  json t = json::object();
  for (const char* k : {"seq_begin", "seq_end", "t_begin_ns", "t_end_ns", "step", "phase",
                        "allocated_min", "allocated_max", "reserved_min", "reserved_max"})
    t[k] = json::array();
  json at_max = json::object(), cat_max = json::object();
  for (Category c : kAllCategories) {
    at_max[std::string(name_of(c))] = json::array();
    cat_max[std::string(name_of(c))] = json::array();
  }
  for (const TimelineBucket& b : timeline) {
    t["seq_begin"].push_back(b.seq_begin);
    t["seq_end"].push_back(b.seq_end);
    t["t_begin_ns"].push_back(b.t_begin_ns);
    t["t_end_ns"].push_back(b.t_end_ns);
    t["step"].push_back(b.step);
    t["phase"].push_back(std::string(name_of(b.phase)));
    t["allocated_min"].push_back(b.allocated_min);
    t["allocated_max"].push_back(b.allocated_max);
    t["reserved_min"].push_back(b.reserved_min);
    t["reserved_max"].push_back(b.reserved_max);
    for (Category c : kAllCategories) {
      at_max[std::string(name_of(c))].push_back(b.at_max[static_cast<int>(c)]);
      cat_max[std::string(name_of(c))].push_back(b.category_max[static_cast<int>(c)]);
    }
  }
  t["at_max"] = std::move(at_max);
  t["category_max"] = std::move(cat_max);
  return t;
}

json trace_json(const TraceReport& r) {
  const TraceHeader& h = r.header;
  json j;
  j["path"] = r.path;
  j["header"] = {{"schema_version", h.schema_version},
                 {"run_name", h.run_name},
                 {"rank", h.rank},
                 {"world_size", h.world_size},
                 {"backend", h.backend},
                 {"device", h.device},
                 {"capacity_bytes", h.capacity_bytes},
                 {"outside_allocator", h.outside_allocator},
                 {"started_at", h.started_at},
                 {"headroom_version", h.headroom_version},
                 {"config_toml", h.config_toml}};
  j["steps"] = steps_json(r.steps);
  json pp = json::array();
  for (const PhasePeakRecord& p : r.phase_peaks)
    pp.push_back({{"step", p.step},
                  {"phase", std::string(name_of(p.phase))},
                  {"peak_allocated", p.peak_allocated},
                  {"peak_reserved", p.peak_reserved}});
  j["phase_peaks"] = std::move(pp);
  json by_phase = json::object();
  const auto phases = peak_by_phase(r);
  for (Phase p : kAllPhases)
    by_phase[std::string(name_of(p))] = phases[static_cast<int>(p)];
  const MemoryReplay& m = r.replay;
  j["memory"] = {{"events_recorded", r.events_recorded},
                 {"events", r.num_events},
                 {"tags", r.num_tags},
                 {"peak_allocated", m.peak_allocated},
                 {"peak_reserved", m.peak_reserved},
                 {"final_allocated", m.final_allocated},
                 {"final_reserved", m.final_reserved},
                 {"unmatched_frees", m.unmatched_frees},
                 {"peak_seq", r.peak_seq},
                 {"peak_step", r.peak_step},
                 {"peak_t_ns", r.peak_t_ns},
                 {"peak_by_category", by_category(m.peak_by_category)},
                 {"at_peak_by_category", by_category(m.at_peak_by_category)},
                 {"peak_by_phase", std::move(by_phase)}};
  j["timeline"] = timeline_json(r.timeline);
  json spans = json::array();
  for (const PhaseSpan& s : r.phases)
    spans.push_back({{"step", s.step},
                     {"phase", std::string(name_of(s.phase))},
                     {"seq_begin", s.seq_begin},
                     {"seq_end", s.seq_end},
                     {"t_begin_ns", s.t_begin_ns},
                     {"t_end_ns", s.t_end_ns},
                     {"allocs", s.allocs},
                     {"largest_alloc", s.largest_alloc},
                     {"largest_tag", s.largest_tag}});
  j["phases"] = std::move(spans);
  json blocks = json::array();
  for (const PeakBlock& b : r.peak_blocks)
    blocks.push_back({{"bytes", b.bytes},
                      {"tag", b.tag},
                      {"category", std::string(name_of(b.category))},
                      {"phase", std::string(name_of(b.phase))},
                      {"layer", b.layer},
                      {"step", b.step}});
  j["peak_blocks"] = std::move(blocks);
  if (r.oom) {
    const Postmortem& pm = *r.oom;
    json oom = {{"requested_bytes", pm.requested_bytes},
                {"rounded_bytes", pm.rounded_bytes},
                {"segment_bytes", pm.segment_bytes},
                {"tag", pm.tag},
                {"description", pm.description},
                {"category", std::string(name_of(pm.category))},
                {"phase", std::string(name_of(pm.phase))},
                {"layer", pm.layer},
                {"step", pm.step},
                {"allocated", pm.allocated},
                {"reserved", pm.reserved},
                {"capacity", pm.capacity},
                {"source", pm.source},
                {"capacity_limited", pm.capacity_limited},
                {"live_by_category", by_category(pm.live_by_category)}};
    json top = json::array();
    for (const LiveBlock& b : pm.largest_live)
      top.push_back({{"bytes", b.bytes},
                     {"tag", b.tag},
                     {"category", std::string(name_of(b.category))},
                     {"phase", std::string(name_of(b.phase))},
                     {"layer", b.layer},
                     {"step", b.step}});
    oom["top_blocks"] = std::move(top);
    if (r.oom_seq) oom["event_seq"] = *r.oom_seq;
    // The lines the page shows, so a field added to postmortem_fields()
    // reaches scripts without a change here.
    json fields = json::array();
    for (const ReportField& f : oom_fields(r))
      fields.push_back({{"key", f.key}, {"label", f.label}, {"value", f.value}});
    oom["fields"] = std::move(fields);
    j["oom"] = std::move(oom);
  } else {
    j["oom"] = nullptr;
  }
  return j;
}

}  // namespace

std::string render_json(const RunReport& run) {
  json j;
  j["source"] = run.source;
  j["traces"] = json::array();
  for (const TraceReport& t : run.traces)
    j["traces"].push_back(trace_json(t));
  // Invalid UTF-8 in a tag or path becomes U+FFFD instead of an exception.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace headroom
