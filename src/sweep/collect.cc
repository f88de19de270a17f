#include "sweep/collect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "sweep/resolve.h"
#include "trace/reader.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    out.emplace_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool parse_int(std::string_view text, int& value) {
  if (text.empty() || text.size() > 9) return false;
  int v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  value = v;
  return true;
}

// "5-7%2", "3,9", "4" -> the indices.
std::vector<int> expand_indices(std::string_view list) {
  std::vector<int> out;
  const size_t percent = list.find('%');
  if (percent != std::string_view::npos) list = list.substr(0, percent);
  for (const std::string& part : split(list, ',')) {
    const size_t dash = part.find('-');
    int a = 0, b = 0;
    if (dash == std::string::npos) {
      if (parse_int(part, a)) out.push_back(a);
    } else if (parse_int(std::string_view(part).substr(0, dash), a) &&
               parse_int(std::string_view(part).substr(dash + 1), b) && a <= b &&
               b - a <= static_cast<int>(kMaxSweepTasks)) {
      for (int i = a; i <= b; ++i)
        out.push_back(i);
    }
  }
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A rank's trace files in a run folder: trace.rank<R>.h5 and its
// continuations trace.rank<R>.from-step-N.h5.
struct TraceFiles {
  std::vector<fs::path> all;        // every rank's
  std::vector<fs::path> lead_rank;  // rank 0's, in the order they were written
};

TraceFiles find_traces(const fs::path& run_dir) {
  TraceFiles files;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return files;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("trace.rank", 0) != 0 || name.size() < 3 ||
        name.substr(name.size() - 3) != ".h5" || name.find(".staging-") != std::string::npos)
      continue;
    files.all.push_back(entry.path());
    if (name.rfind("trace.rank0.", 0) == 0) files.lead_rank.push_back(entry.path());
  }
  std::sort(files.all.begin(), files.all.end());
  std::sort(files.lead_rank.begin(), files.lead_rank.end());
  return files;
}

std::string display_value(const std::string& toml_text) {
  // A plain string shows without its TOML quotes.
  if (toml_text.size() >= 2 && toml_text.front() == '"' && toml_text.back() == '"' &&
      toml_text.find_first_of("\\ ", 1) == std::string::npos)
    return toml_text.substr(1, toml_text.size() - 2);
  return toml_text;
}

}  // namespace

std::map<int, SlurmTaskState> parse_slurm_states(std::string_view text, const std::string& job_id) {
  std::map<int, SlurmTaskState> states;
  for (const std::string& line : split(text, '\n')) {
    const std::vector<std::string> fields = split(line, '|');
    if (fields.size() < 2) continue;
    const std::string& id = fields[0];
    // "123_4" or "123_[5-7%2]"; steps ("123_4.batch") and other jobs skipped.
    if (id.rfind(job_id + "_", 0) != 0 || id.find('.') != std::string::npos) continue;
    std::string_view rest = std::string_view(id).substr(job_id.size() + 1);
    if (!rest.empty() && rest.front() == '[' && rest.back() == ']')
      rest = rest.substr(1, rest.size() - 2);
    SlurmTaskState state;
    // "CANCELLED by 0" -> "CANCELLED".
    state.state = fields[1].substr(0, fields[1].find(' '));
    if (fields.size() >= 3) {
      int code = 0;
      if (parse_int(std::string_view(fields[2]).substr(0, fields[2].find(':')), code))
        state.exit_code = code;
    }
    for (int index : expand_indices(rest))
      states[index] = state;
  }
  return states;
}

ExitRecord read_exit_record(const std::string& dir, int index) {
  ExitRecord record;
  std::ifstream in(fs::path(dir) / "status" / (task_number(index) + ".exit"));
  std::string line;
  while (std::getline(in, line)) {
    ++record.attempts;
    for (const std::string& word : split(line, ' ')) {
      if (word.rfind("rc=", 0) == 0) parse_int(std::string_view(word).substr(3), record.rc);
      if (word.rfind("restart=", 0) == 0)
        parse_int(std::string_view(word).substr(8), record.restart);
    }
  }
  return record;
}

std::string outcome_of_exit_code(int rc) {
  switch (rc) {
    case 0:
      return "ok";
    case 1:
      return "internal error";
    case 2:
      return "usage";
    case 3:
      return "out of memory";
    case 4:
      return "numerical";
    case 5:
      return "preempted";
    default:
      return "exit " + std::to_string(rc);
  }
}

std::vector<TaskResult> collect_sweep(const SweepManifest& manifest,
                                      const std::map<int, SlurmTaskState>& slurm) {
  std::vector<TaskResult> results;
  for (const ManifestTask& task : manifest.tasks) {
    TaskResult r;
    r.index = task.index;
    r.values = task.values;
    r.in_array = task.in_array;
    r.steps = task.steps;
    r.planned_peak = task.plan.max_peak_reserved();
    r.plan_verdict = task.plan.verdict;
    r.final_loss = std::numeric_limits<double>::quiet_NaN();

    const TraceFiles traces = find_traces(task.run_dir);
    try {
      for (const fs::path& path : traces.all) {
        const TraceReader trace = TraceReader::open(path.string());
        for (const StepRecord& step : trace.steps())
          r.measured_peak = std::max(r.measured_peak, step.peak_reserved);
      }
      // The continuation with the furthest step holds the final loss.
      int64_t last_step = -1;
      for (const fs::path& path : traces.lead_rank) {
        const std::vector<StepRecord> steps = TraceReader::open(path.string()).steps();
        if (steps.empty() || steps.back().step <= last_step) continue;
        last_step = steps.back().step;
        r.final_loss = steps.back().loss;
        double sum = 0;
        for (const StepRecord& s : steps)
          sum += s.tokens_per_second;
        r.tokens_per_second = sum / static_cast<double>(steps.size());
      }
      r.steps_done = last_step + 1;
    } catch (const UsageError& e) {
      r.note = e.what();
    }

    const ExitRecord record = read_exit_record(manifest.dir, task.index);
    r.exit_code = record.rc;
    r.attempts = record.attempts;
    auto it = slurm.find(task.index);
    if (it != slurm.end()) r.slurm_state = it->second.state;
    if (!task.in_array) {
      r.outcome = "not in array";
    } else if (r.slurm_state == "PENDING" || r.slurm_state == "REQUEUED") {
      r.outcome = record.rc == 5 ? "preempted, requeued" : "pending";
    } else if (r.slurm_state == "RUNNING" || r.slurm_state == "COMPLETING") {
      r.outcome = "running";
    } else if (record.rc >= 0) {
      r.outcome = outcome_of_exit_code(record.rc);
    } else if (it != slurm.end() && it->second.exit_code >= 0 && r.slurm_state != "COMPLETED") {
      // The script did not get to record srun's code (cancelled, timed out).
      r.outcome = "exit " + std::to_string(it->second.exit_code) + " (" + r.slurm_state + ")";
    } else if (!r.slurm_state.empty()) {
      r.outcome = "unknown (" + r.slurm_state + ", no exit record)";
    } else {
      r.outcome = "not run";
    }
    results.push_back(std::move(r));
  }
  return results;
}

namespace {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table results_table(const SweepManifest& manifest, const std::vector<TaskResult>& results,
                    bool csv) {
  Table t;
  t.header.push_back("task");
  for (const std::string& key : manifest.keys)
    t.header.push_back(key);
  for (const char* column :
       {"outcome", "steps", "final loss", "tokens/s", "planned peak", "measured peak"})
    t.header.push_back(column);
  if (csv) {
    t.header.push_back("attempts");
    t.header.push_back("exit code");
    t.header.push_back("slurm state");
    t.header.push_back("plan");
  }
  for (const TaskResult& r : results) {
    std::vector<std::string> row{task_number(r.index)};
    for (const std::string& key : manifest.keys) {
      std::string value;
      for (const auto& [k, v] : r.values)
        if (k == key) value = display_value(v);
      row.push_back(value);
    }
    row.push_back(r.outcome);
    row.push_back(std::to_string(r.steps_done) + (csv ? "" : "/" + std::to_string(r.steps)));
    char buf[64];
    if (std::isnan(r.final_loss)) {
      row.emplace_back(csv ? "" : "-");
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", r.final_loss);
      row.emplace_back(buf);
    }
    if (r.steps_done == 0) {
      row.emplace_back(csv ? "" : "-");
    } else {
      std::snprintf(buf, sizeof buf, "%.0f", r.tokens_per_second);
      row.emplace_back(buf);
    }
    if (csv) {
      row.push_back(std::to_string(r.planned_peak));
      row.push_back(r.measured_peak ? std::to_string(r.measured_peak) : "");
      row.push_back(std::to_string(r.attempts));
      row.push_back(r.exit_code >= 0 ? std::to_string(r.exit_code) : "");
      row.push_back(r.slurm_state);
      row.push_back(r.plan_verdict);
    } else {
      row.push_back(format_bytes(r.planned_peak));
      row.push_back(r.measured_peak ? format_bytes(r.measured_peak) : "-");
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

std::string format_results_table(const SweepManifest& manifest,
                                 const std::vector<TaskResult>& results) {
  const Table t = results_table(manifest, results, /*csv=*/false);
  std::vector<size_t> width(t.header.size());
  for (size_t c = 0; c < t.header.size(); ++c) {
    width[c] = t.header[c].size();
    for (const auto& row : t.rows)
      width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = " ";
    for (size_t c = 0; c < cells.size(); ++c) {
      text += " " + cells[c];
      if (c + 1 < cells.size()) text += std::string(width[c] - cells[c].size(), ' ') + " ";
    }
    out += text + "\n";
  };
  line(t.header);
  for (const auto& row : t.rows)
    line(row);
  return out;
}

std::string format_results_csv(const SweepManifest& manifest,
                               const std::vector<TaskResult>& results) {
  const Table t = results_table(manifest, results, /*csv=*/true);
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c)
      out += (c ? "," : "") + csv_field(cells[c]);
    out += "\n";
  };
  line(t.header);
  for (const auto& row : t.rows)
    line(row);
  return out;
}

}  // namespace headroom
