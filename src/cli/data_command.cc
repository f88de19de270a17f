#include <cstdio>

#include "commands.h"
#include "util/error.h"

namespace headroom {

int data_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::puts(
        "usage: headroom data <tool> ...\n\n"
        "Dataset tools (synth, convert, tokenize, inspect, batches) are not built yet:\n"
        "they arrive with the data issue. See docs/ for the planned HDF5 layout.");
    return 0;
  }
  throw UsageError(
      "no data tools are built yet (synth, convert, tokenize, inspect and batches arrive with "
      "the data issue)");
}

}  // namespace headroom
