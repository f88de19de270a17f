#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "report/summary.h"
#include "trace/reader.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace headroom {

namespace {

// A path as an error shows it: whole when it is a path a person typed, cut
// when it is 5000 characters a script got wrong.
std::string shown(const std::string& path) {
  constexpr size_t kShown = 200;
  if (path.size() <= kShown) return path;
  return path.substr(0, kShown) + "... (" + std::to_string(path.size()) + " characters)";
}

// A run folder holds trace.rank<R>.h5 (train) and/or plan.rank<R>.h5 (plan).
std::vector<fs::path> traces_in(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  fs::directory_iterator entries(dir, ec);
  if (ec) throw UsageError(shown(dir.string()) + ": cannot list the folder: " + ec.message());
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".h5" &&
        (name.rfind("trace.rank", 0) == 0 || name.rfind("plan.rank", 0) == 0))
      found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// One line per trace of a folder with several: the ranks side by side, so a
// rank whose batches (or an OOM) set it apart stands out.
std::string compare_traces(const std::vector<fs::path>& traces) {
  std::string out = "\ntraces side by side:\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-32s %-9s %6s %-14s %-14s %s\n", "file", "rank", "steps",
                "peak alloc", "peak reserved", "longest sample / OOM");
  out += line;
  for (const fs::path& path : traces) {
    const TraceReader trace = TraceReader::open(path.string());
    uint64_t allocated = 0, reserved = 0;
    int64_t longest = 0;
    const std::vector<StepRecord> steps = trace.steps();
    for (const StepRecord& step : steps) {
      allocated = std::max(allocated, step.peak_allocated);
      reserved = std::max(reserved, step.peak_reserved);
      longest = std::max(longest, step.longest_sample);
    }
    std::string last = std::to_string(longest);
    if (trace.has_oom()) {
      const Postmortem oom = trace.oom();
      last = "OUT OF MEMORY at step " + std::to_string(oom.step) + " (" + oom.tag + ")";
    }
    const std::string rank =
        std::to_string(trace.header().rank) + "/" + std::to_string(trace.header().world_size);
    std::snprintf(line, sizeof line, "  %-32s %-9s %6zu %-14s %-14s %s\n",
                  path.filename().string().c_str(), rank.c_str(), steps.size(),
                  format_bytes(allocated).c_str(), format_bytes(reserved).c_str(), last.c_str());
    out += line;
  }
  return out;
}

}  // namespace

int report_command(const std::vector<std::string>& args) {
  std::string target;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help");
  po::options_description all;
  all.add(visible).add_options()("target", po::value<std::string>(&target));
  po::positional_options_description positional;
  positional.add("target", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + " (see headroom report --help)");
  }
  if (vm.count("help")) {
    std::cout << "usage: headroom report <trace.h5 | run folder>\n\n"
                 "Prints a trace's attributes, its step count and the peak allocated bytes per\n"
                 "category (replayed from /memory/events), and the OOM postmortem if any.\n\n"
              << visible << "\n";
    return 0;
  }
  if (target.empty()) throw UsageError("expected a trace file or a run folder (see --help)");
  // The error_code overloads: a symlink loop or a name past NAME_MAX must be
  // a message naming the argument, not a filesystem_error (exit 1).
  std::error_code ec;
  const fs::file_status status = fs::status(target, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError(shown(target) + ": " + ec.message() + " (the report argument)");
  if (!fs::exists(status)) throw UsageError(shown(target) + ": no such file or folder");

  std::vector<fs::path> traces;
  try {
    if (fs::is_directory(status)) {
      traces = traces_in(target);
      if (traces.empty())
        throw UsageError(shown(target) + ": no trace.rank<R>.h5 or plan.rank<R>.h5 in this folder");
    } else {
      traces.push_back(target);
    }
  } catch (const fs::filesystem_error& e) {
    throw UsageError(shown(target) + ": " + e.code().message() + " (the report argument)");
  }
  for (size_t i = 0; i < traces.size(); ++i) {
    if (i) std::printf("\n");
    std::printf("%s", summarize_trace(TraceReader::open(traces[i].string())).c_str());
  }
  if (traces.size() > 1) std::printf("%s", compare_traces(traces).c_str());
  return 0;
}

}  // namespace headroom
