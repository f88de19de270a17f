// render_comparison: two runs side by side (a plan and its run, ZeRO-2 and
// ZeRO-3, before and after a knob): what their configs set differently, the
// peaks per category and per phase with deltas, and the first allocator
// event where the two streams part (a plan and its own run should make the
// same allocations in the same order, byte for byte).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "report/run_report.h"
#include "util/bytes.h"

namespace headroom {

namespace {

// "section.key" -> value text, from a resolved config: [section] headers
// and one `key = value` a line (what --print-config writes). Comments and
// blank lines are skipped; a value spanning lines keeps its first line.
std::map<std::string, std::string> flatten_toml(const std::string& toml) {
  std::map<std::string, std::string> out;
  std::string section;
  size_t start = 0;
  while (start < toml.size()) {
    size_t end = toml.find('\n', start);
    if (end == std::string::npos) end = toml.size();
    std::string line = toml.substr(start, end - start);
    start = end + 1;
    auto trim = [](std::string s) {
      const size_t b = s.find_first_not_of(" \t\r");
      const size_t e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = trim(line.substr(1, line.find(']') - 1));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim(line.substr(0, eq));
    out[section.empty() ? key : section + "." + key] = trim(line.substr(eq + 1));
  }
  return out;
}

std::string signed_bytes(uint64_t a, uint64_t b) {
  if (a == b) return "0";
  return (b > a ? "+" : "-") + format_bytes(b > a ? b - a : a - b);
}

std::string row(const std::string& label, const std::string& a, const std::string& b,
                const std::string& delta) {
  char text[512];
  std::snprintf(text, sizeof text, "  %-26s %-22s %-22s %s\n", label.c_str(), a.c_str(), b.c_str(),
                delta.c_str());
  return text;
}

std::string bytes_row(const std::string& label, uint64_t a, uint64_t b) {
  return row(label, format_bytes(a), format_bytes(b), signed_bytes(a, b));
}

std::string describe(const MemoryEvent& e, const std::vector<std::string>& tags) {
  static const char* kActions[] = {"alloc", "free", "segment_alloc", "segment_free", "oom"};
  std::string tag = e.tag_id < tags.size() ? tags[e.tag_id] : "?";
  return std::string(kActions[static_cast<int>(e.action)]) + " " + format_bytes_exact(e.bytes) +
         " " + std::string(name_of(e.category)) + " " + tag + " (" + std::string(name_of(e.phase)) +
         ", layer " + std::to_string(e.layer) + ", step " + std::to_string(e.step) + ")";
}

// Where the two event streams first differ in anything but address and time.
std::string first_difference(const TraceReport& a, const TraceReport& b) {
  const TraceReader ra = TraceReader::open(a.path), rb = TraceReader::open(b.path);
  const std::vector<std::string> ta = ra.tags(), tb = rb.tags();
  const uint64_t n = std::min(a.num_events, b.num_events);
  constexpr uint64_t kBatch = 1 << 16;
  for (uint64_t start = 0; start < n; start += kBatch) {
    const std::vector<MemoryEvent> ea = ra.read_events(start, std::min(kBatch, n - start));
    const std::vector<MemoryEvent> eb = rb.read_events(start, ea.size());
    for (size_t i = 0; i < ea.size() && i < eb.size(); ++i) {
      const MemoryEvent &x = ea[i], &y = eb[i];
      const std::string tx = x.tag_id < ta.size() ? ta[x.tag_id] : "";
      const std::string ty = y.tag_id < tb.size() ? tb[y.tag_id] : "";
      if (x.action != y.action || x.bytes != y.bytes || x.category != y.category || tx != ty ||
          x.phase != y.phase || x.layer != y.layer || x.step != y.step)
        return "  first difference at event " + std::to_string(start + i) +
               ":\n    A: " + describe(x, ta) + "\n    B: " + describe(y, tb) + "\n";
    }
  }
  if (a.num_events == b.num_events)
    return "  the event streams are the same (" + std::to_string(n) +
           " events: action, bytes, category, tag, phase, layer, step)\n";
  return "  the first " + std::to_string(n) + " events are the same; " +
         (a.num_events > b.num_events ? "A" : "B") + " has " +
         std::to_string(std::max(a.num_events, b.num_events) - n) + " more\n";
}

std::string compare_traces(const TraceReport& a, const TraceReport& b) {
  std::string out;
  out += row("", "A", "B", "B - A");
  out += row("trace", a.path.substr(a.path.find_last_of('/') + 1),
             b.path.substr(b.path.find_last_of('/') + 1), "");
  out += row(
      "steps", std::to_string(a.steps.size()), std::to_string(b.steps.size()),
      std::to_string(static_cast<int64_t>(b.steps.size()) - static_cast<int64_t>(a.steps.size())));
  out +=
      row("events", std::to_string(a.num_events), std::to_string(b.num_events),
          std::to_string(static_cast<int64_t>(b.num_events) - static_cast<int64_t>(a.num_events)));
  out += bytes_row("peak allocated", a.replay.peak_allocated, b.replay.peak_allocated);
  out += bytes_row("peak reserved", a.replay.peak_reserved, b.replay.peak_reserved);
  out += "  per category (peak)\n";
  for (Category c : kAllCategories) {
    const int i = static_cast<int>(c);
    if (a.replay.peak_by_category[i] == 0 && b.replay.peak_by_category[i] == 0) continue;
    out += bytes_row("  " + std::string(name_of(c)), a.replay.peak_by_category[i],
                     b.replay.peak_by_category[i]);
  }
  out += "  per phase (peak allocated)\n";
  const auto pa = peak_by_phase(a), pb = peak_by_phase(b);
  for (Phase p : kAllPhases) {
    const int i = static_cast<int>(p);
    if (pa[i] == 0 && pb[i] == 0) continue;
    out += bytes_row("  " + std::string(name_of(p)), pa[i], pb[i]);
  }
  if (a.oom || b.oom) out += row("OOM", a.oom ? a.oom->tag : "-", b.oom ? b.oom->tag : "-", "");
  if (a.num_events > 0 && b.num_events > 0) out += first_difference(a, b);
  return out;
}

}  // namespace

std::string render_comparison(const RunReport& a, const RunReport& b) {
  std::string out = "A  " + a.source + "\nB  " + b.source + "\n";
  if (a.traces.empty() || b.traces.empty()) return out;
  const auto ca = flatten_toml(a.traces[0].header.config_toml);
  const auto cb = flatten_toml(b.traces[0].header.config_toml);
  std::string diffs;
  for (const auto& [key, value] : ca) {
    auto it = cb.find(key);
    if (it == cb.end())
      diffs += "  " + key + ": " + value + " | (not set)\n";
    else if (it->second != value)
      diffs += "  " + key + ": " + value + " | " + it->second + "\n";
  }
  for (const auto& [key, value] : cb)
    if (!ca.count(key)) diffs += "  " + key + ": (not set) | " + value + "\n";
  out += "\nconfig differences (A | B):\n" + (diffs.empty() ? "  none\n" : diffs);
  const size_t n = std::min(a.traces.size(), b.traces.size());
  for (size_t i = 0; i < n; ++i) {
    out += "\nrank " + std::to_string(a.traces[i].header.rank) + ":\n";
    out += compare_traces(a.traces[i], b.traces[i]);
  }
  if (a.traces.size() != b.traces.size())
    out += "\nA has " + std::to_string(a.traces.size()) + " traces, B " +
           std::to_string(b.traces.size()) + "; only the first " + std::to_string(n) +
           " are compared\n";
  return out;
}

}  // namespace headroom
