// A sweep's tasks made concrete: each task's config resolved by the normal
// loader (the base file, its --set, then the task's values as --set), with
// its own run.name and a run folder under the sweep's.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "sweep/sweep_spec.h"

namespace headroom {

struct ResolvedTask {
  SweepTask task;
  std::vector<std::string> overrides;  // everything applied after the file, in order
  ExperimentConfig config;             // run.name = <base run.name>-NNN, run.out_dir = runs_dir
};

// The text of a task file's name: "007" for task 7 (tasks/007.toml and the
// Slurm array index 7).
std::string task_number(int index);

// Resolves every task of `tasks` against the base experiment `toml_text`
// (named `source_name`, its [sweep] table skipped) with `base_overrides`
// first, then the task's values, then run.name and run.out_dir (the task's
// folder is `runs_dir`/<base name>-NNN), then `extra_overrides` (what the
// sbatch script adds at train time, e.g. checkpoint.resume=auto, so that
// it is checked now). Every rule between keys is checked per task. Throws
// one UsageError listing each failing task:
//   task 003 (zero.stage=3 lora.rank=64): --set zero.stage=3: zero.stage: ...
// and, when the base sets checkpoint.dir and no varied key changes it,
// that every task would share it.
std::vector<ResolvedTask> resolve_sweep_tasks(std::string_view toml_text,
                                              std::string_view source_name,
                                              const std::vector<std::string>& base_overrides,
                                              const std::vector<SweepTask>& tasks,
                                              const std::string& runs_dir,
                                              const std::vector<std::string>& extra_overrides);

}  // namespace headroom
