// manifest.json of a sweep folder: what `headroom sweep` made (the tasks,
// their varied values, their plans, which are in the job array) and, after
// --submit, the Slurm job id; `sweep status` and `sweep collect` read it
// back. Written with write-then-rename, so a reader never sees half of one.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sweep/plan_tasks.h"
#include "sweep/sweep_spec.h"

namespace headroom {

struct ManifestTask {
  int index = 0;
  std::string file;      // "tasks/007.toml", relative to the sweep folder
  std::string run_name;  // the task's run.name
  std::string run_dir;   // its run folder (absolute)
  int64_t steps = 0;     // its run.steps
  std::vector<std::pair<std::string, std::string>> values;  // varied key -> TOML text
  TaskPlan plan;
  bool in_array = false;  // fits (or --keep-unfit): the sbatch array runs it
};

struct SweepManifest {
  static constexpr int kVersion = 1;
  std::string headroom_version;
  std::string created_at;         // ISO-8601 UTC
  std::string source;             // the base experiment file as given
  std::string dir;                // the sweep folder (absolute)
  std::string workdir;            // where tasks run (the sweep was made here; relative paths hold)
  std::vector<std::string> keys;  // the varied keys, in axis order
  std::string target;             // run.backend of the tasks: "cpu" or "cuda"
  SlurmShape slurm;
  int world_size = 1;
  int parallel = 0;  // the array's %P; 0 = no cap
  int max_requeues = 0;
  int signal_lead = 0;  // seconds
  std::string array;    // "0-2,5%2"; "" when no task is in the array
  std::string sbatch;   // the script (absolute); "" when none was written
  std::string job_id;   // after --submit
  std::vector<ManifestTask> tasks;
};

// <dir>/manifest.json. Throws UsageError naming the file on failure (a full
// disk included).
void write_manifest(const std::string& dir, const SweepManifest& manifest);

// Throws UsageError "<dir>/manifest.json: ..." when it is missing (not a
// sweep folder), not JSON, or lacks a field.
SweepManifest read_manifest(const std::string& dir);

}  // namespace headroom
