#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "report/summary.h"
#include "trace/reader.h"
#include "util/error.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace headroom {

namespace {

// A run folder holds trace.rank<R>.h5 (train) and/or plan.rank<R>.h5 (plan).
std::vector<fs::path> traces_in(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".h5" &&
        (name.rfind("trace.rank", 0) == 0 || name.rfind("plan.rank", 0) == 0))
      found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
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
  if (!fs::exists(target)) throw UsageError(target + ": no such file or folder");

  std::vector<fs::path> traces;
  if (fs::is_directory(target)) {
    traces = traces_in(target);
    if (traces.empty())
      throw UsageError(target + ": no trace.rank<R>.h5 or plan.rank<R>.h5 in this folder");
  } else {
    traces.push_back(target);
  }
  for (size_t i = 0; i < traces.size(); ++i) {
    if (i) std::printf("\n");
    std::printf("%s", summarize_trace(TraceReader::open(traces[i].string())).c_str());
  }
  return 0;
}

}  // namespace headroom
