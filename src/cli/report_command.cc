#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "report/run_report.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

int report_command(const std::vector<std::string>& args) {
  std::vector<std::string> targets;
  std::string html, perfetto;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "json", "print the report as JSON instead of text (docs/report.md)")(
      "html", po::value<std::string>(&html)->value_name("FILE"),
      "write a self-contained HTML page (charts, tables, the OOM, the config)")(
      "perfetto", po::value<std::string>(&perfetto)->value_name("FILE"),
      "write Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing")(
      "plan", "of a run folder, read only the plan's traces (plan.rank<R>.h5)")(
      "run", "of a run folder, read only the run's traces (trace.rank<R>.h5)");
  po::options_description all;
  all.add(visible).add_options()("target", po::value<std::vector<std::string>>(&targets));
  po::positional_options_description positional;
  positional.add("target", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + " (see headroom report --help)");
  }
  if (vm.count("help")) {
    std::cout << "usage: headroom report <trace.h5 | run folder> [--json] [--html FILE] "
                 "[--perfetto FILE]\n"
                 "       headroom report A B        (two traces or run folders side by side)\n\n"
                 "Prints a trace's attributes, its step count and the peak allocated bytes per\n"
                 "category (replayed from /memory/events), and the OOM postmortem if any.\n\n"
              << visible << "\n";
    return 0;
  }
  if (targets.empty()) throw UsageError("expected a trace file or a run folder (see --help)");
  if (targets.size() > 2)
    throw UsageError("expected one trace or run folder, or two to compare; got " +
                     std::to_string(targets.size()) + " (see --help)");
  if (vm.count("plan") && vm.count("run"))
    throw UsageError("--plan and --run exclude each other (see --help)");
  TraceSelection select = TraceSelection::kAll;
  if (vm.count("plan")) select = TraceSelection::kPlans;
  if (vm.count("run")) select = TraceSelection::kRuns;

  if (targets.size() == 2) {
    if (vm.count("json") || !html.empty() || !perfetto.empty())
      throw UsageError("--json, --html and --perfetto take one run; A B compares two as text");
    // `report DIR DIR`: A is the folder's plan, B its run. Otherwise each
    // side is its run (or its plan when it holds only one), unless --plan
    // or --run says which.
    const bool same = targets[0] == targets[1];
    if (select == TraceSelection::kAll) select = TraceSelection::kRunsElsePlans;
    const RunReport a = build_run_report(targets[0], same ? TraceSelection::kPlans : select);
    const RunReport b = build_run_report(targets[1], same ? TraceSelection::kRuns : select);
    std::printf("%s", render_comparison(a, b).c_str());
    return 0;
  }

  const RunReport run = build_run_report(targets[0], select);
  if (!html.empty()) write_file_atomically(html, render_html(run));
  if (!perfetto.empty()) write_file_atomically(perfetto, render_perfetto(run));
  if (vm.count("json")) {
    std::printf("%s", render_json(run).c_str());
  } else if (html.empty() && perfetto.empty()) {
    std::printf("%s", render_text(run).c_str());
  } else {
    if (!html.empty()) std::printf("wrote %s\n", html.c_str());
    if (!perfetto.empty()) std::printf("wrote %s\n", perfetto.c_str());
  }
  return 0;
}

}  // namespace headroom
