#include "run_options.h"

#include <boost/program_options.hpp>
#include <iostream>

#include "parse_options.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

bool parse_run_options(const std::string& command, const std::vector<std::string>& args,
                       RunOptions& options) {
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "set", po::value<std::vector<std::string>>(&options.overrides)->composing(),
      "override a config key: --set section.key=value (repeatable; validated like the file)")(
      "print-config", po::bool_switch(&options.print_config),
      "print the resolved config (file + --set) as TOML and exit")(
      "overwrite", po::bool_switch(&options.overwrite),
      "replace the earlier run with the same run.name (its traces, config and checkpoints), "
      "once this one has started")(
      "no-advice", po::bool_switch(),
      "after an out-of-memory, do not re-plan with single changes to say what would fit");
  if (command == "plan")
    visible.add_options()("world-size", po::value<int>(&options.world_size)->default_value(1),
                          "simulate this many ranks, one after another, each with its own "
                          "batches (parallel.tensor > 1: its tensor-parallel part of the "
                          "model); report every rank's peak");
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&options.config_path));
  po::positional_options_description positional;
  positional.add("config", 1);
  const po::variables_map vm = parse_command_line(args, visible, hidden, positional, command);
  // Ranks are planned one after another in this process, each writing its
  // own trace (about a second each for an 8B model): past this bound a plan
  // would run for hours. The users' jobs are 1-64 GPUs.
  constexpr int kMaxPlannedRanks = 1024;
  if (options.world_size < 1 || options.world_size > kMaxPlannedRanks)
    throw UsageError("--world-size " + std::to_string(options.world_size) + ": expected 1.." +
                     std::to_string(kMaxPlannedRanks) +
                     " (ranks are planned one after another, each writing a trace)");
  options.advise = !vm["no-advice"].as<bool>();
  if (vm.count("help")) {
    std::cout
        << "usage: headroom " << command << " [exp.toml] [options]\n\n"
        << (command == "plan"
                ? "Runs the experiment's schedule on the meta backend: every allocation and\n"
                  "free of the real run, no math. Writes results/<run.name>/plan.rank<R>.h5.\n"
                : "Runs the experiment. Writes results/<run.name>/trace.rank<R>.h5 and\n"
                  "config.toml. With no file, runs the embedded quickstart experiment.\n")
        << "\n"
        << visible << "\n";
    return false;
  }
  return true;
}

}  // namespace headroom
