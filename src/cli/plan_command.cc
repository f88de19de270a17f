#include "commands.h"
#include "run_experiment.h"

namespace headroom {

int plan_command(const std::vector<std::string>& args) {
  RunOptions options;
  if (!parse_run_options("plan", args, options)) return 0;
  return run_experiment(options, RunMode::kPlan);
}

}  // namespace headroom
