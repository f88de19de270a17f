// `train` and `plan` are one code path: the same config, schedule and
// allocation sequence; plan only swaps the backend for meta (promise 1).
#pragma once

#include "run_options.h"

namespace headroom {

enum class RunMode { kTrain, kPlan };

// Loads the config, prepares results/<run.name>/, runs every step, writes the
// trace and prints the summary. Returns the exit code: 0, or 3 after an
// OutOfMemory whose postmortem was printed and written to the trace. Throws
// UsageError for bad config/options before anything is written.
int run_experiment(const RunOptions& options, RunMode mode);

}  // namespace headroom
