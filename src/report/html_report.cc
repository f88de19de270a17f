// render_html: the report as one self-contained page (inline CSS, SVG drawn
// here, a few lines of script for sorting and hover; nothing fetched). The
// charts are drawn from the model's buckets merged to pixel columns, so the
// page's size follows its width, not the trace's length.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "report/run_report.h"
#include "util/bytes.h"

namespace headroom {

namespace {

// A byte figure carried as a double (a chart's values, its scaled axis),
// clamped into uint64_t's range first: a trace's largest counts round up to
// 2^64 as doubles, and casting that (or a negative) back is undefined.
std::string format_byte_figure(double bytes) {
  if (!(bytes > 0)) return format_bytes(0);
  if (bytes >= 0x1p64) return format_bytes(UINT64_MAX);
  return format_bytes(static_cast<uint64_t>(bytes));
}

const char* category_color(Category c) {
  static const char* kColors[kNumCategories] = {"#4e79a7", "#f28e2b", "#e15759",
                                                "#76b7b2", "#59a14f", "#edc948",
                                                "#b07aa1", "#ff9da7", "#9c755f"};
  return kColors[static_cast<int>(c)];
}

const char* phase_color(Phase p) {
  static const char* kColors[kNumPhases] = {"#bab0ac", "#4e79a7", "#e15759", "#edc948",
                                            "#59a14f", "#b07aa1", "#76b7b2"};
  return kColors[static_cast<int>(p)];
}

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v, int decimals = 1) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

std::string g6(double v) {
  if (!std::isfinite(v)) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

std::string step_label(int64_t step) {
  return step < 0 ? std::string("init") : "step " + std::to_string(step);
}

// One pixel column of a chart: the bucket with the highest allocated among
// those it merges (its per-category snapshot), the highest reserved.
struct Column {
  uint64_t seq_begin = 0, seq_end = 0;
  uint64_t allocated = 0, reserved = 0, allocated_min = UINT64_MAX;
  std::array<uint64_t, kNumCategories> at_max{};
  Phase phase = Phase::kInit;
  int64_t step = -1;
};

std::vector<Column> columns(const std::vector<TimelineBucket>& buckets, uint64_t seq0,
                            uint64_t seq1, size_t width) {
  std::vector<Column> out(width);
  const double span = static_cast<double>(std::max<uint64_t>(1, seq1 - seq0));
  std::vector<bool> used(width, false);
  for (const TimelineBucket& b : buckets) {
    if (b.seq_end <= seq0 || b.seq_begin >= seq1) continue;
    size_t x = static_cast<size_t>(static_cast<double>(b.seq_begin - std::min(b.seq_begin, seq0)) /
                                   span * static_cast<double>(width));
    x = std::min(x, width - 1);
    Column& c = out[x];
    if (!used[x]) {
      used[x] = true;
      c.seq_begin = b.seq_begin;
      c.phase = b.phase;
      c.step = b.step;
    }
    c.seq_end = b.seq_end;
    c.allocated_min = std::min(c.allocated_min, b.allocated_min);
    c.reserved = std::max(c.reserved, b.reserved_max);
    if (b.allocated_max >= c.allocated) {
      c.allocated = b.allocated_max;
      c.at_max = b.at_max;
    }
  }
  std::vector<Column> kept;
  for (size_t x = 0; x < width; ++x)
    if (used[x]) kept.push_back(out[x]);
  return kept;
}

// A memory chart over events [seq0, seq1): categories stacked (each
// column's snapshot at its allocated maximum), reserved as a line, step
// boundaries, a phase strip, the peak and the OOM marked.
std::string memory_chart(const TraceReport& r, uint64_t seq0, uint64_t seq1,
                         const std::string& id) {
  constexpr double kW = 1100, kH = 300, kLeft = 70, kTop = 10, kStrip = 10;
  const std::vector<Column> cols = columns(r.timeline, seq0, seq1, 1100);
  uint64_t top = std::max(r.replay.peak_reserved, r.replay.peak_allocated);
  const uint64_t cap = r.header.capacity_bytes;
  const bool show_cap = cap > 0 && cap <= 2 * std::max<uint64_t>(top, 1);
  if (show_cap) top = std::max(top, cap);
  if (r.oom) top = std::max(top, r.oom->reserved + r.oom->segment_bytes);
  top = std::max<uint64_t>(top, 1);
  const double span = static_cast<double>(std::max<uint64_t>(1, seq1 - seq0));
  auto X = [&](uint64_t seq) {
    return kLeft + (static_cast<double>(seq) - static_cast<double>(seq0)) / span * kW;
  };
  auto Y = [&](double bytes) { return kTop + kH - bytes / static_cast<double>(top) * kH; };

  std::string s = "<svg class=\"chart memory\" id=\"" + id + "\" width=\"" +
                  num(kLeft + kW + 10, 0) + "\" height=\"" + num(kTop + kH + kStrip + 40, 0) +
                  "\" data-seq0=\"" + std::to_string(seq0) + "\" data-seq1=\"" +
                  std::to_string(seq1) + "\">\n";
  // Axis: 5 gridlines.
  for (int i = 0; i <= 4; ++i) {
    double bytes = static_cast<double>(top) * i / 4;
    s += "<line class=\"grid\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + kW) + "\" y1=\"" +
         num(Y(bytes)) + "\" y2=\"" + num(Y(bytes)) + "\"/><text class=\"axis\" x=\"" +
         num(kLeft - 4) + "\" y=\"" + num(Y(bytes) + 4) + "\" text-anchor=\"end\">" +
         esc(format_byte_figure(bytes)) + "</text>\n";
  }
  // Stacked categories: each a closed path, top edge left to right, then the
  // bottom edge (the categories below) back.
  std::vector<uint64_t> below(cols.size(), 0);
  for (Category c : kAllCategories) {
    const int ci = static_cast<int>(c);
    if (r.replay.peak_by_category[ci] == 0) continue;
    std::string top_edge, bottom_edge;
    for (size_t i = 0; i < cols.size(); ++i) {
      const double y = Y(static_cast<double>(below[i] + cols[i].at_max[ci]));
      top_edge += (i == 0 ? "M" : "L") + num(X(cols[i].seq_begin)) + "," + num(y) + "L" +
                  num(X(cols[i].seq_end)) + "," + num(y);
    }
    for (size_t i = cols.size(); i-- > 0;) {
      const double y = Y(static_cast<double>(below[i]));
      bottom_edge += "L" + num(X(cols[i].seq_end)) + "," + num(y) + "L" +
                     num(X(cols[i].seq_begin)) + "," + num(y);
      below[i] += cols[i].at_max[ci];
    }
    s += "<path class=\"series\" data-category=\"" + std::string(name_of(c)) + "\" fill=\"" +
         category_color(c) + "\" d=\"" + top_edge + bottom_edge + "Z\"><title>" +
         std::string(name_of(c)) + ", peak " +
         esc(format_bytes_exact(r.replay.peak_by_category[ci])) + "</title></path>\n";
  }
  // Reserved, as a step line.
  if (r.replay.peak_reserved > 0) {
    std::string d;
    for (size_t i = 0; i < cols.size(); ++i) {
      const double y = Y(static_cast<double>(cols[i].reserved));
      d += (i == 0 ? "M" : "L") + num(X(cols[i].seq_begin)) + "," + num(y) + "L" +
           num(X(cols[i].seq_end)) + "," + num(y);
    }
    s += "<path class=\"reserved\" d=\"" + d + "\"><title>reserved, peak " +
         esc(format_bytes_exact(r.replay.peak_reserved)) + "</title></path>\n";
  }
  if (show_cap)
    s += "<line class=\"capacity\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + kW) + "\" y1=\"" +
         num(Y(static_cast<double>(cap))) + "\" y2=\"" + num(Y(static_cast<double>(cap))) +
         "\"/><text class=\"note\" x=\"" + num(kLeft + kW - 4) + "\" y=\"" +
         num(Y(static_cast<double>(cap)) - 4) + "\" text-anchor=\"end\">capacity " +
         esc(format_bytes(cap)) + "</text>\n";
  // Step boundaries (at most ~200 drawn) and the phase strip.
  std::vector<const PhaseSpan*> starts;
  for (size_t i = 0; i < r.phases.size(); ++i)
    if ((i == 0 || r.phases[i].step != r.phases[i - 1].step) && r.phases[i].seq_begin >= seq0 &&
        r.phases[i].seq_begin < seq1)
      starts.push_back(&r.phases[i]);
  const size_t every = std::max<size_t>(1, starts.size() / 200);
  for (size_t i = 0; i < starts.size(); i += every) {
    const double x = X(starts[i]->seq_begin);
    s += "<line class=\"stepline\" x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(kTop) +
         "\" y2=\"" + num(kTop + kH) + "\"><title>" + step_label(starts[i]->step) +
         "</title></line>\n";
  }
  const double strip_y = kTop + kH + 2;
  for (const PhaseSpan& p : r.phases) {
    if (p.seq_end <= seq0 || p.seq_begin >= seq1) continue;
    const double x0 = X(std::max(p.seq_begin, seq0)), x1 = X(std::min(p.seq_end, seq1));
    if (x1 - x0 < 0.5 && &p != &r.phases.front()) continue;  // under a pixel: the columns show it
    s += "<rect class=\"phase\" x=\"" + num(x0) + "\" y=\"" + num(strip_y) + "\" width=\"" +
         num(std::max(0.5, x1 - x0)) + "\" height=\"" + num(kStrip) + "\" fill=\"" +
         phase_color(p.phase) + "\"><title>" + step_label(p.step) + " " +
         std::string(name_of(p.phase)) + "</title></rect>\n";
  }
  // The peak, and the OOM.
  if (r.replay.peak_allocated > 0 && r.peak_seq >= seq0 && r.peak_seq < seq1) {
    const double x = X(r.peak_seq), y = Y(static_cast<double>(r.replay.peak_allocated));
    s += "<circle class=\"peak\" cx=\"" + num(x) + "\" cy=\"" + num(y) +
         "\" r=\"4\"/><text class=\"note\" x=\"" + num(std::min(x + 6, kLeft + kW - 200)) +
         "\" y=\"" + num(std::max(y - 6, kTop + 10)) + "\">peak " +
         esc(format_bytes(r.replay.peak_allocated)) + " (" + step_label(r.peak_step) + ")</text>\n";
  }
  if (r.oom) {
    uint64_t seq = r.oom_seq ? *r.oom_seq : (seq1 > 0 ? seq1 - 1 : 0);
    if (seq >= seq0 && seq < seq1) {
      const double x = X(seq);
      s += "<line class=\"oom\" x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(kTop) +
           "\" y2=\"" + num(kTop + kH) + "\"/><text class=\"oomtext\" x=\"" + num(x - 4) +
           "\" y=\"" + num(kTop + 24) + "\" text-anchor=\"end\">OOM: " + esc(r.oom->tag) + " +" +
           esc(format_bytes(r.oom->rounded_bytes)) + "</text>\n";
    }
  }
  s += "<text class=\"axis\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop + kH + kStrip + 26) +
       "\">allocator events " + std::to_string(seq0) + " to " + std::to_string(seq1) +
       " (x: event order; strip: phase)</text>\n";
  s += "<line class=\"cursor\" x1=\"0\" x2=\"0\" y1=\"" + num(kTop) + "\" y2=\"" + num(kTop + kH) +
       "\" visibility=\"hidden\"/>\n";
  s += "</svg>\n";
  return s;
}

std::string legend(const TraceReport& r) {
  std::string s = "<div class=\"legend\">";
  for (Category c : kAllCategories) {
    const int ci = static_cast<int>(c);
    if (r.replay.peak_by_category[ci] == 0) continue;
    s += "<span><i style=\"background:" + std::string(category_color(c)) + "\"></i>" +
         std::string(name_of(c)) + " " + esc(format_bytes(r.replay.peak_by_category[ci])) +
         "</span>";
  }
  s += "<span><i class=\"line\"></i>reserved</span>";
  for (Phase p : kAllPhases)
    s += "<span><i class=\"small\" style=\"background:" + std::string(phase_color(p)) + "\"></i>" +
         std::string(name_of(p)) + "</span>";
  return s + "</div>\n";
}

// The event range of one step, from the phase spans.
std::pair<uint64_t, uint64_t> step_range(const TraceReport& r, int64_t step) {
  uint64_t b = UINT64_MAX, e = 0;
  for (const PhaseSpan& p : r.phases)
    if (p.step == step) {
      b = std::min(b, p.seq_begin);
      e = std::max(e, p.seq_end);
    }
  return {b == UINT64_MAX ? 0 : b, e};
}

// A small line chart of one per-step series; skipped steps in red.
std::string step_chart(const std::string& title, const std::vector<StepRecord>& steps,
                       double (*get)(const StepRecord&), bool bytes = false) {
  constexpr double kW = 330, kH = 90, kLeft = 8, kTop = 20;
  double lo = INFINITY, hi = -INFINITY;
  for (const StepRecord& s : steps) {
    double v = get(s);
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  std::string label = [&] {
    if (!std::isfinite(lo)) return std::string("no values");
    if (bytes) return format_byte_figure(lo) + " .. " + format_byte_figure(hi);
    return g6(lo) + " .. " + g6(hi);
  }();
  std::string s = "<figure class=\"small\"><svg width=\"" + num(kW + 16, 0) + "\" height=\"" +
                  num(kH + kTop + 6, 0) + "\"><text class=\"title\" x=\"" + num(kLeft) +
                  "\" y=\"13\">" + esc(title) + "</text><text class=\"axis\" x=\"" +
                  num(kLeft + kW) + "\" y=\"13\" text-anchor=\"end\">" + esc(label) + "</text>";
  if (std::isfinite(lo) && !steps.empty()) {
    const double range = hi > lo ? hi - lo : 1;
    const double n = static_cast<double>(std::max<size_t>(1, steps.size() - 1));
    std::string d;
    std::string dots;
    for (size_t i = 0; i < steps.size(); ++i) {
      double v = get(steps[i]);
      if (!std::isfinite(v)) continue;
      const double x = kLeft + static_cast<double>(i) / n * kW;
      const double y = kTop + kH - (v - lo) / range * kH;
      d += (d.empty() ? "M" : "L") + num(x) + "," + num(y);
      if (steps[i].skipped)
        dots += "<circle class=\"skipped\" cx=\"" + num(x) + "\" cy=\"" + num(y) +
                "\" r=\"3\"><title>step " + std::to_string(steps[i].step) +
                " skipped</title></circle>";
    }
    s += "<path class=\"stepseries\" d=\"" + d + "\"/>" + dots;
  }
  return s + "</svg></figure>\n";
}

// Tag groups: a numeric segment stays with the one before it, so
// block.12.attn.q_proj is all > block.12 > block.12.attn > block.12.attn.q_proj.
std::vector<std::string> tag_levels(const std::string& tag) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= tag.size()) {
    size_t dot = tag.find('.', start);
    std::string part =
        tag.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (numeric && !parts.empty())
      parts.back() += "." + part;
    else
      parts.push_back(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::vector<std::string> levels;
  std::string prefix;
  for (const std::string& p : parts) {
    prefix = prefix.empty() ? p : prefix + "." + p;
    levels.push_back(prefix);
  }
  return levels;
}

struct Group {
  std::string name;
  int depth = 0;
  uint64_t bytes = 0;
  uint64_t blocks = 0;
  uint64_t largest = 0;
  std::array<uint64_t, kNumCategories> by_category{};
  std::vector<size_t> children;
};

std::vector<Group> group_blocks(const std::vector<PeakBlock>& blocks) {
  std::vector<Group> groups(1);
  groups[0].name = "all";
  std::map<std::string, size_t> index;
  for (const PeakBlock& b : blocks) {
    size_t at = 0;
    auto add = [&](Group& g) {
      g.bytes += b.bytes;
      ++g.blocks;
      g.largest = std::max(g.largest, b.bytes);
      g.by_category[static_cast<int>(b.category)] += b.bytes;
    };
    add(groups[0]);
    int depth = 0;
    for (const std::string& level : tag_levels(b.tag.empty() ? "(untagged)" : b.tag)) {
      ++depth;
      auto it = index.find(level);
      if (it == index.end()) {
        it = index.emplace(level, groups.size()).first;
        Group& g = groups.emplace_back();
        g.name = level;
        g.depth = depth;
        groups[at].children.push_back(it->second);
      }
      at = it->second;
      add(groups[at]);
    }
  }
  return groups;
}

// The category holding most of a group's bytes: its colour.
Category dominant(const Group& g) {
  int best = 0;
  for (int i = 1; i < kNumCategories; ++i)
    if (g.by_category[i] > g.by_category[best]) best = i;
  return kAllCategories[best];
}

std::string blocks_table(const std::vector<Group>& groups, uint64_t peak) {
  std::string s =
      "<table class=\"sortable blocks\"><thead><tr><th data-type=\"text\">group</th>"
      "<th data-type=\"num\">level</th><th data-type=\"num\" data-sorted=\"desc\">bytes</th>"
      "<th data-type=\"num\">% of peak</th><th data-type=\"num\">blocks</th>"
      "<th data-type=\"num\">largest</th><th data-type=\"text\">mostly</th></tr></thead><tbody>\n";
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return groups[a].bytes > groups[b].bytes; });
  for (size_t i : order) {
    const Group& g = groups[i];
    s += "<tr data-depth=\"" + std::to_string(g.depth) +
         "\"><td style=\"padding-left:" + std::to_string(4 + 12 * g.depth) + "px\">" + esc(g.name) +
         "</td><td data-v=\"" + std::to_string(g.depth) + "\">" + std::to_string(g.depth) +
         "</td><td data-v=\"" + std::to_string(g.bytes) + "\">" + esc(format_bytes(g.bytes)) +
         "</td><td data-v=\"" +
         num(peak ? 100.0 * static_cast<double>(g.bytes) / static_cast<double>(peak) : 0, 2) +
         "\">" +
         num(peak ? 100.0 * static_cast<double>(g.bytes) / static_cast<double>(peak) : 0, 1) +
         "</td><td data-v=\"" + std::to_string(g.blocks) + "\">" + std::to_string(g.blocks) +
         "</td><td data-v=\"" + std::to_string(g.largest) + "\">" + esc(format_bytes(g.largest)) +
         "</td><td>" + std::string(name_of(dominant(g))) + "</td></tr>\n";
  }
  return s + "</tbody></table>\n";
}

// Icicle: a row per level, each group as wide as its bytes.
std::string icicle(const std::vector<Group>& groups) {
  constexpr double kW = 1100, kRow = 22;
  constexpr int kDepth = 4;
  std::string s = "<svg class=\"icicle\" width=\"" + num(kW + 10, 0) + "\" height=\"" +
                  num(kRow * (kDepth + 1) + 4, 0) + "\">\n";
  const double total = static_cast<double>(std::max<uint64_t>(1, groups[0].bytes));
  struct Item {
    size_t g;
    double x;
  };
  std::vector<Item> level = {{0, 0}};
  for (int depth = 0; depth <= kDepth && !level.empty(); ++depth) {
    std::vector<Item> next;
    for (const Item& it : level) {
      const Group& g = groups[it.g];
      const double w = static_cast<double>(g.bytes) / total * kW;
      if (w < 0.5) continue;
      const Category c = dominant(g);
      const double y = depth * kRow;
      s += "<g><rect x=\"" + num(it.x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) +
           "\" height=\"" + num(kRow - 2) + "\" fill=\"" + category_color(c) + "\"/>";
      if (w > 60) {
        std::string name = g.name.substr(g.name.find_last_of('.') == std::string::npos || depth <= 1
                                             ? 0
                                             : g.name.find_last_of('.') + 1);
        s += "<text x=\"" + num(it.x + 3) + "\" y=\"" + num(y + 15) + "\">" +
             esc(name.substr(0, static_cast<size_t>(w / 7))) + "</text>";
      }
      s += "<title>" + esc(g.name) + ": " + esc(format_bytes(g.bytes)) + ", " +
           std::to_string(g.blocks) + " blocks</title></g>\n";
      std::vector<size_t> kids = g.children;
      std::sort(kids.begin(), kids.end(),
                [&](size_t a, size_t b) { return groups[a].bytes > groups[b].bytes; });
      double x = it.x;
      for (size_t k : kids) {
        next.push_back({k, x});
        x += static_cast<double>(groups[k].bytes) / total * kW;
      }
    }
    level = std::move(next);
  }
  return s + "</svg>\n";
}

std::string phase_peaks_table(const RunReport& run) {
  // Columns: each phase that allocated, one per rank; rows: steps.
  std::vector<Phase> phases;
  for (Phase p : kAllPhases)
    for (const TraceReport& t : run.traces)
      if (peak_by_phase(t)[static_cast<int>(p)] > 0 &&
          std::find(phases.begin(), phases.end(), p) == phases.end())
        phases.push_back(p);
  std::map<int64_t, std::map<std::pair<int, int>, uint64_t>>
      rows;  // step -> (phase, trace) -> bytes
  for (size_t t = 0; t < run.traces.size(); ++t)
    for (const PhasePeakRecord& p : run.traces[t].phase_peaks)
      rows[p.step][{static_cast<int>(p.phase), static_cast<int>(t)}] = p.peak_allocated;
  std::string s = "<table class=\"sortable phases\"><thead><tr><th data-type=\"num\">step</th>";
  for (Phase p : phases)
    for (const TraceReport& t : run.traces)
      s += "<th data-type=\"num\">" + std::string(name_of(p)) +
           (run.traces.size() > 1 ? " r" + std::to_string(t.header.rank) : "") + "</th>";
  s += "</tr></thead><tbody>\n";
  for (const auto& [step, cells] : rows) {
    s += "<tr><td data-v=\"" + std::to_string(step) + "\">" + step_label(step) + "</td>";
    for (Phase p : phases)
      for (size_t t = 0; t < run.traces.size(); ++t) {
        auto it = cells.find({static_cast<int>(p), static_cast<int>(t)});
        if (it == cells.end()) {
          s += "<td data-v=\"-1\"></td>";
        } else {
          s += "<td data-v=\"" + std::to_string(it->second) + "\">" +
               esc(format_bytes(it->second)) + "</td>";
        }
      }
    s += "</tr>\n";
  }
  return s + "</tbody></table>\n";
}

std::string oom_section(const TraceReport& r) {
  const Postmortem& pm = *r.oom;
  std::string s = "<section class=\"oom\"><h3>Out of memory</h3>\n<table class=\"fields\">";
  for (const ReportField& f : oom_fields(r))
    s += "<tr data-key=\"" + esc(f.key) + "\"><th>" + esc(f.label) + "</th><td>" + esc(f.value) +
         "</td></tr>";
  s += "</table>\n<h4>live bytes by category at the OOM</h4><table class=\"fields\">";
  for (Category c : kAllCategories) {
    const uint64_t b = pm.live_by_category[static_cast<int>(c)];
    if (b == 0) continue;
    s += "<tr><th><i class=\"swatch\" style=\"background:" + std::string(category_color(c)) +
         "\"></i>" + std::string(name_of(c)) + "</th><td>" + esc(format_bytes_exact(b)) +
         "</td></tr>";
  }
  s += "</table>\n<h4>largest live blocks</h4><table class=\"sortable\"><thead><tr>"
       "<th data-type=\"num\">bytes</th><th data-type=\"text\">tag</th><th "
       "data-type=\"text\">category</th><th data-type=\"text\">phase</th><th "
       "data-type=\"num\">layer</th><th data-type=\"num\">step</th></tr></thead><tbody>";
  for (const LiveBlock& b : pm.largest_live)
    s += "<tr><td data-v=\"" + std::to_string(b.bytes) + "\">" + esc(format_bytes(b.bytes)) +
         "</td><td>" + esc(b.tag) + "</td><td>" + std::string(name_of(b.category)) + "</td><td>" +
         std::string(name_of(b.phase)) + "</td><td data-v=\"" + std::to_string(b.layer) + "\">" +
         (b.layer >= 0 ? std::to_string(b.layer) : "-") + "</td><td data-v=\"" +
         std::to_string(b.step) + "\">" + step_label(b.step) + "</td></tr>";
  return s + "</tbody></table></section>\n";
}

double get_loss(const StepRecord& s) {
  return s.loss;
}
double get_grad_norm(const StepRecord& s) {
  return s.grad_norm;
}
double get_lr(const StepRecord& s) {
  return s.lr;
}
double get_tps(const StepRecord& s) {
  return s.tokens_per_second;
}
double get_longest(const StepRecord& s) {
  return static_cast<double>(s.longest_sample);
}
double get_padding(const StepRecord& s) {
  return s.padding_fraction;
}
double get_peak(const StepRecord& s) {
  return static_cast<double>(s.peak_allocated);
}
double get_reserved(const StepRecord& s) {
  return static_cast<double>(s.peak_reserved);
}

std::string trace_section(const TraceReport& r, size_t index) {
  const std::string id = "r" + std::to_string(index);
  const TraceHeader& h = r.header;
  std::string s = "<section class=\"trace\" id=\"" + id + "\" data-rank=\"" +
                  std::to_string(h.rank) + "\" data-peak-bytes=\"" +
                  std::to_string(r.replay.peak_allocated) + "\">\n";
  s += "<h2>" + esc(r.is_plan() ? "plan" : "run") + " " + esc(h.run_name) + ", rank " +
       std::to_string(h.rank) + " of " + std::to_string(h.world_size) + "</h2>\n";
  s += "<p class=\"meta\">" + esc(r.path) + " &middot; schema " + std::to_string(h.schema_version) +
       " &middot; headroom " + esc(h.headroom_version) + " &middot; " + esc(h.backend) + " on " +
       esc(h.device) + " &middot; started " + esc(h.started_at) + "</p>\n";
  s += "<div class=\"figures\">";
  s += "<div><b class=\"peak-value\" id=\"peak-" + id + "\" data-peak-bytes=\"" +
       std::to_string(r.replay.peak_allocated) + "\">" +
       esc(format_bytes_exact(r.replay.peak_allocated)) + "</b><span>peak allocated (" +
       step_label(r.peak_step) + ")</span></div>";
  s += "<div><b data-reserved-bytes=\"" + std::to_string(r.replay.peak_reserved) + "\">" +
       esc(format_bytes(r.replay.peak_reserved)) + "</b><span>peak reserved</span></div>";
  s += "<div><b>" +
       esc(h.capacity_bytes ? format_bytes(h.capacity_bytes) : std::string("unlimited")) +
       "</b><span>capacity</span></div>";
  s += "<div><b>" + std::to_string(r.steps.size()) + "</b><span>steps</span></div>";
  s += "<div><b>" + std::to_string(r.num_events) + "</b><span>events</span></div>";
  if (r.oom)
    s += "<div class=\"bad\"><b>OOM</b><span>" + esc(step_label(r.oom->step)) + ", " +
         esc(r.oom->tag) + "</span></div>";
  s += "</div>\n";

  s += "<h3>Memory over time</h3>\n";
  if (r.timeline.empty()) {
    s += "<p>" +
         std::string(r.events_recorded ? "No events in this trace."
                                       : "No events recorded (trace.memory_events = false).") +
         "</p>\n";
  } else {
    s += legend(r);
    s += memory_chart(r, 0, r.num_events, "timeline-" + id);
    for (int64_t step : r.detail_steps()) {
      auto [b, e] = step_range(r, step);
      if (e <= b) continue;
      const bool is_oom = r.oom && r.oom->step == step;
      const bool is_peak = step == r.peak_step;
      s += "<h3>" + step_label(step) + " in detail (" +
           (is_peak && is_oom ? "the peak and the OOM"
            : is_peak         ? "the peak"
                              : "the OOM") +
           "; " + std::to_string(e - b) + " events)</h3>\n";
      s += memory_chart(r, b, e, "detail-" + id + "-" + std::to_string(step < 0 ? 0 : step + 1));
    }
  }

  // The postmortem first when there is one: it is what the reader came for.
  if (r.oom) s += oom_section(r);
  if (!r.steps.empty()) {
    s += "<h3>Steps</h3><div class=\"smalls\">\n";
    if (!r.is_plan()) {
      s += step_chart("loss", r.steps, get_loss);
      s += step_chart("grad norm", r.steps, get_grad_norm);
      s += step_chart("learning rate", r.steps, get_lr);
      s += step_chart("tokens/s", r.steps, get_tps);
    }
    s += step_chart("longest sample (tokens)", r.steps, get_longest);
    s += step_chart("padding fraction", r.steps, get_padding);
    s += step_chart("peak allocated", r.steps, get_peak, true);
    s += step_chart("peak reserved", r.steps, get_reserved, true);
    s += "</div>\n";
    const auto skipped = std::count_if(r.steps.begin(), r.steps.end(),
                                       [](const StepRecord& x) { return x.skipped; });
    s += "<p>" + std::to_string(skipped) + " skipped step" + (skipped == 1 ? "" : "s") +
         (r.is_plan() ? " (a plan computes no loss)" : " (non-finite loss or gradients)") +
         ".</p>\n";
  }

  if (!r.peak_blocks.empty()) {
    const std::vector<Group> groups = group_blocks(r.peak_blocks);
    s += "<h3>Blocks live at the peak (" + std::to_string(r.peak_blocks.size()) + " blocks, " +
         esc(format_bytes_exact(groups[0].bytes)) + ")</h3>\n";
    s += icicle(groups);
    s += "<p class=\"hint\">Click a column to sort; level 1 groups are <code>block.N</code>, "
         "<code>param</code>, ...</p>\n";
    s += blocks_table(groups, r.replay.peak_allocated);
  }
  s += "<details><summary>resolved config</summary><pre class=\"config\">" + esc(h.config_toml) +
       "</pre></details>\n";
  if (!h.outside_allocator.empty())
    s += "<details><summary>outside the allocator</summary><pre>" + esc(h.outside_allocator) +
         "</pre></details>\n";
  return s + "</section>\n";
}

constexpr const char* kStyle = R"CSS(
body{font:13px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 4px;border-top:1px solid #ccc;padding-top:12px}
h3{font-size:14px;margin:16px 0 4px}h4{font-size:13px;margin:10px 0 4px}
.meta,.hint{color:#666}.figures{display:flex;gap:24px;margin:8px 0}
.figures div{display:flex;flex-direction:column}.figures b{font-size:18px}.figures span{color:#666}
.figures .bad b{color:#c00}
svg text{font-size:11px;fill:#333}svg .axis{fill:#777}svg .title{font-weight:600}
.grid{stroke:#eee}.stepline{stroke:#999;stroke-width:.5;stroke-dasharray:2,3}
.reserved{fill:none;stroke:#000;stroke-width:1.2}.capacity{stroke:#c00;stroke-dasharray:6,3}
.series{stroke:none;opacity:.9}.peak{fill:#000}.note{font-weight:600}
.oom{stroke:#c00;stroke-width:2}.oomtext{fill:#c00!important;font-weight:700}
.cursor{stroke:#333;stroke-width:.5}
.legend span{margin-right:12px;white-space:nowrap}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.legend i.line{height:2px;background:#000}.legend i.small{width:8px;height:6px}
.smalls{display:flex;flex-wrap:wrap;gap:4px}figure.small{margin:0;border:1px solid #eee}
.stepseries{fill:none;stroke:#4e79a7;stroke-width:1.5}.skipped{fill:#c00}
table{border-collapse:collapse;margin:4px 0}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
table.sortable th{cursor:pointer;background:#f6f6f6}table.sortable th[data-sorted]::after{content:" \25BE"}
td[data-v]{text-align:right;font-variant-numeric:tabular-nums}table.blocks{max-height:none}
.icicle text{font-size:11px;fill:#fff}.swatch{display:inline-block;width:9px;height:9px;margin-right:4px}
section.oom{border-left:4px solid #c00;padding-left:12px}pre.config{background:#f8f8f8;padding:8px;max-height:400px;overflow:auto}
#tip{position:fixed;pointer-events:none;background:#fffe;border:1px solid #999;padding:4px 6px;font-size:12px;display:none;white-space:pre}
)CSS";

// Sorting tables, the hover read-out over memory charts, and a marker that
// the script ran (data-ready), which the browser test reads.
constexpr const char* kScript = R"JS(
(function(){
  function fmt(b){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(b>=1024&&i<4){b/=1024;i++;}return (i?b.toFixed(1):b)+' '+u[i];}
  document.querySelectorAll('table.sortable').forEach(function(t){
    t.querySelectorAll('th').forEach(function(th,col){
      th.addEventListener('click',function(){
        var num=th.dataset.type==='num',desc=th.dataset.sorted!=='desc';
        t.querySelectorAll('th').forEach(function(h){delete h.dataset.sorted;});
        th.dataset.sorted=desc?'desc':'asc';
        var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(a,b){
          var x=a.cells[col],y=b.cells[col];
          var c=num?(parseFloat(x.dataset.v||x.textContent)-parseFloat(y.dataset.v||y.textContent))
                   :x.textContent.localeCompare(y.textContent);
          return desc?-c:c;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  var data=JSON.parse(document.getElementById('columns').textContent);
  var tip=document.getElementById('tip');
  document.querySelectorAll('svg.memory').forEach(function(svg){
    var cols=data[svg.id]; if(!cols) return;
    var cur=svg.querySelector('.cursor');
    svg.addEventListener('mousemove',function(ev){
      var r=svg.getBoundingClientRect(),x=ev.clientX-r.left;
      var s0=+svg.dataset.seq0,s1=+svg.dataset.seq1,seq=s0+(x-70)/1100*(s1-s0);
      var best=null;for(var i=0;i<cols.length;i++){if(cols[i][0]<=seq)best=cols[i];else break;}
      if(!best){tip.style.display='none';return;}
      cur.setAttribute('x1',x);cur.setAttribute('x2',x);cur.setAttribute('visibility','visible');
      tip.textContent='event '+best[0]+', '+best[1]+'\nallocated '+fmt(best[2])+'\nreserved '+fmt(best[3])+best[4];
      tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';
    });
    svg.addEventListener('mouseleave',function(){tip.style.display='none';cur.setAttribute('visibility','hidden');});
  });
  // How long the page took to parse and run this, for bench/report_bench.sh.
  document.body.dataset.scriptMs=Math.round(performance.now());
  document.body.dataset.ready='1';
})();
)JS";

// The hover read-out's data: per chart, per column [seq, "step k phase",
// allocated, reserved, "\ncategory bytes..."].
std::string columns_json(const TraceReport& r, uint64_t seq0, uint64_t seq1) {
  std::string out = "[";
  bool first = true;
  for (const Column& c : columns(r.timeline, seq0, seq1, 275)) {
    std::string cats;
    for (Category cat : kAllCategories) {
      const uint64_t b = c.at_max[static_cast<int>(cat)];
      if (b > 0) cats += "\\n" + std::string(name_of(cat)) + " " + format_bytes(b);
    }
    out += std::string(first ? "" : ",") + "[" + std::to_string(c.seq_begin) + ",\"" +
           step_label(c.step) + " " + std::string(name_of(c.phase)) + "\"," +
           std::to_string(c.allocated) + "," + std::to_string(c.reserved) + ",\"" + cats + "\"]";
    first = false;
  }
  return out + "]";
}

}  // namespace

std::string render_html(const RunReport& run) {
  uint64_t peak = 0;
  for (const TraceReport& t : run.traces)
    peak = std::max(peak, t.replay.peak_allocated);
  const std::string name = run.traces.empty() ? run.source : run.traces[0].header.run_name;
  std::string s =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>headroom report: " +
      esc(name) + "</title><style>" + kStyle + "</style></head>\n<body data-peak-bytes=\"" +
      std::to_string(peak) + "\">\n";
  s += "<h1>headroom report: " + esc(name) + "</h1>\n<p class=\"meta\">" + esc(run.source) + ", " +
       std::to_string(run.traces.size()) + " trace" + (run.traces.size() == 1 ? "" : "s") +
       "; peak allocated <b id=\"peak\" data-peak-bytes=\"" + std::to_string(peak) + "\">" +
       esc(format_bytes_exact(peak)) + "</b></p>\n";
  if (run.traces.size() > 1) {
    s += "<table><tr><th>rank</th><th>steps</th><th>peak allocated</th><th>peak "
         "reserved</th><th>OOM</th></tr>";
    for (const TraceReport& t : run.traces)
      s += "<tr><td>" + std::to_string(t.header.rank) + "</td><td>" +
           std::to_string(t.steps.size()) + "</td><td>" +
           esc(format_bytes(t.replay.peak_allocated)) + "</td><td>" +
           esc(format_bytes(t.replay.peak_reserved)) + "</td><td>" +
           (t.oom ? esc(step_label(t.oom->step) + " " + t.oom->tag) : std::string("-")) +
           "</td></tr>";
    s += "</table>\n";
  }
  std::string columns = "{";
  for (size_t i = 0; i < run.traces.size(); ++i) {
    const TraceReport& t = run.traces[i];
    s += trace_section(t, i);
    const std::string id = "r" + std::to_string(i);
    if (t.timeline.empty()) continue;
    columns += std::string(columns.size() > 1 ? "," : "") + "\"timeline-" + id +
               "\":" + columns_json(t, 0, t.num_events);
    for (int64_t step : t.detail_steps()) {
      auto [b, e] = step_range(t, step);
      if (e <= b) continue;
      columns += ",\"detail-" + id + "-" + std::to_string(step < 0 ? 0 : step + 1) +
                 "\":" + columns_json(t, b, e);
    }
  }
  columns += "}";
  s += "<h2>Peaks by phase, per step" +
       std::string(run.traces.size() > 1 ? ", ranks side by side" : "") + "</h2>\n";
  s += phase_peaks_table(run);
  s += "<div id=\"tip\"></div>\n<script type=\"application/json\" id=\"columns\">" + columns +
       "</script>\n<script>" + kScript + "</script>\n</body></html>\n";
  return s;
}

}  // namespace headroom
