// Options shared by `train` and `plan`: which experiment, which overrides.
#pragma once

#include <string>
#include <vector>

namespace headroom {

struct RunOptions {
  std::string config_path;             // empty: the embedded quickstart
  std::vector<std::string> overrides;  // "section.key=value", applied in order
  bool print_config = false;           // print the resolved config and stop
  bool overwrite = false;              // replace an existing run folder's trace
  int world_size = 1;                  // plan: ranks to simulate (tensor x data)
  bool advise = true;  // after an OOM, re-plan with single changes (advice/advice.h)
};

// Parses `args` for `command` ("train" or "plan"). Returns false after
// printing --help. Throws UsageError naming the bad option.
bool parse_run_options(const std::string& command, const std::vector<std::string>& args,
                       RunOptions& options);

}  // namespace headroom
