// `train` and `plan` are one code path: the same config, schedule and
// allocation sequence; plan only swaps the backend for meta (promise 1).
#pragma once

#include <string>

#include "run_options.h"

namespace headroom {

enum class RunMode { kTrain, kPlan };

// Loads the config, prepares results/<run.name>/, runs every step, writes the
// trace and prints the summary. Returns the exit code: 0, or 3 after an
// OutOfMemory whose postmortem was printed and written to the trace. Throws
// UsageError for bad config/options before anything is written.
int run_experiment(const RunOptions& options, RunMode mode);

// `export --merge`: builds the experiment's model on the cpu (its base from
// model.weights, or model.seed as training did), loads the LoRA adapters
// from `adapter` (a checkpoint or PEFT folder), folds them into the base
// (W += alpha/r B A) and writes a Hugging Face folder `out`
// (model.safetensors in model.dtype, config.json). Nothing is written when a
// check fails; `out` must not hold a model.safetensors already unless
// `overwrite`.
int export_merged(const RunOptions& options, const std::string& adapter, const std::string& out);

}  // namespace headroom
