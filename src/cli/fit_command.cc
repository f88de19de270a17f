// `headroom fit exp.toml --vary KEY [--device PRESET | --capacity BYTES]`:
// the largest value of one knob that fits, by planning (advice/fit.h).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "advice/fit.h"
#include "commands.h"
#include "config/config.h"
#include "embedded_quickstart.h"
#include "parse_options.h"
#include "util/bytes.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

int fit_command(const std::vector<std::string>& args) {
  std::string config_path, vary, device, capacity;
  std::vector<std::string> overrides;
  int world_size = 1;
  int64_t upper = 1 << 20;
  bool search = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "vary", po::value<std::string>(&vary),
      "the key to search (batch.max_tokens_per_micro_batch, batch.micro_batch_size, "
      "data.max_sample_tokens, lora.rank)")("device", po::value<std::string>(&device),
                                            "plan for this GPU preset (memory.device)")(
      "capacity", po::value<std::string>(&capacity),
      "plan against this many bytes (memory.device_capacity, e.g. 24GiB)")(
      "max", po::value<int64_t>(&upper)->default_value(upper), "the largest value tried")(
      "world-size", po::value<int>(&world_size)->default_value(1),
      "data-parallel ranks, each planned (the highest peak counts)")(
      "set", po::value<std::vector<std::string>>(&overrides)->composing(),
      "override a config key before searching (repeatable)")(
      "search", po::bool_switch(&search),
      "plan combinations of checkpointing, loss chunking, ZeRO stage and offload; print the "
      "ones on the Pareto front of memory against step time");
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&config_path));
  po::positional_options_description positional;
  positional.add("config", 1);
  const po::variables_map vm = parse_command_line(args, visible, hidden, positional, "fit");
  if (vm.count("help")) {
    std::cout
        << "usage: headroom fit [exp.toml] --vary KEY [--device PRESET | --capacity BYTES]\n\n"
           "Plans the experiment for the largest value of KEY that fits, doubling or\n"
           "halving from its configured value, then bisecting. Nothing but the search\n"
           "table is written.\n\n"
        << visible << "\n";
    return 0;
  }
  if (vary.empty() && !search)
    throw UsageError("--vary KEY or --search: required (see headroom fit --help)");
  if (world_size < 1 || world_size > 1024)
    throw UsageError("--world-size " + std::to_string(world_size) + ": expected 1..1024");
  if (!device.empty()) overrides.push_back("memory.device=" + device);
  if (!capacity.empty()) {
    // Checked here so the error names the option the user typed, not the
    // --set it becomes.
    if (!parse_bytes(capacity))
      throw UsageError("--capacity " + capacity +
                       ": expected a byte count such as 24GiB, 80GB or 25769803776");
    overrides.push_back("memory.device_capacity=" + capacity);
  }
  const ExperimentConfig config =
      config_path.empty() ? load_config_string(kQuickstartToml, kQuickstartName, overrides)
                          : load_config_file(config_path, overrides);
  if (config.memory.device.empty() && config.memory.device_capacity == 0)
    throw UsageError(
        "nothing to fit against: pass --device PRESET or --capacity BYTES (or set "
        "memory.device / memory.device_capacity)");
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() /
      ("headroom-fit-" + std::to_string(static_cast<long long>(::getpid())));
  if (!vary.empty())
    std::fputs(format_fit(fit_one(config, world_size, vary, upper, scratch)).c_str(), stdout);
  if (search) std::fputs(format_search(fit_search(config, world_size, scratch)).c_str(), stdout);
  return 0;
}

}  // namespace headroom
