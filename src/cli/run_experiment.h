// `train` and `plan` on the command line: the config loaded, the run
// (train/run.h) built for each rank and executed, its progress printed, its
// outcome made an exit code.
#pragma once

#include <string>

#include "run_options.h"
#include "train/run_mode.h"

namespace headroom {

// Loads the config (the embedded quickstart when no file is named), runs it
// (one rank, the ranks of an MPI job, or `plan --world-size N` rank after
// rank) and prints its progress and summary. Returns the exit code: 0, or 3
// after an OutOfMemory whose postmortem was printed and written to the
// trace. Throws UsageError for bad config/options before anything is
// written, NumericalError (exit 4) after a non-finite stop.
int run_experiment(const RunOptions& options, RunMode mode);

// `export --merge`: the experiment's LoRA adapters from `adapter` folded
// into its base and written to the Hugging Face folder `out`
// (train/merge_adapters.h), with a line saying what was written.
int export_merged(const RunOptions& options, const std::string& adapter, const std::string& out);

}  // namespace headroom
