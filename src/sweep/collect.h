// `headroom sweep status` and `collect`: per task, what Slurm says, what the
// task's batch script recorded (status/NNN.exit: one line per attempt with
// srun's exit code), and what its run folder's traces hold.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sweep/manifest.h"

namespace headroom {

// One array task as Slurm reports it (sacct, or squeue while it is queued).
struct SlurmTaskState {
  std::string state;   // "PENDING", "RUNNING", "COMPLETED", "FAILED", "REQUEUED", ...
  int exit_code = -1;  // sacct's ExitCode before the colon; -1 when not known
};

// Array task index -> state, from `sacct -X -n -P -o JobID,State,ExitCode`
// (or squeue -h -r -o "%i|%T") lines of job `job_id`: "123_4|COMPLETED|0:0";
// pending ranges ("123_[5-7%2]|PENDING|0:0") are expanded. Other jobs' and
// steps' lines are skipped.
std::map<int, SlurmTaskState> parse_slurm_states(std::string_view text, const std::string& job_id);

// The last line of <dir>/status/NNN.exit: its rc and restart count.
struct ExitRecord {
  int rc = -1;  // -1: no record
  int restart = 0;
  int attempts = 0;  // lines in the file
};
ExitRecord read_exit_record(const std::string& dir, int index);

struct TaskResult {
  int index = 0;
  std::vector<std::pair<std::string, std::string>> values;
  bool in_array = false;
  // "ok", "out of memory", "numerical", "usage", "internal error",
  // "preempted" (exit 5 and not requeued again), "running", "pending",
  // "not run", "not in array" (the plan did not fit), "exit N".
  std::string outcome;
  std::string slurm_state;       // "" when Slurm was not asked or did not say
  int exit_code = -1;            // the last recorded; -1 none
  int attempts = 0;              // recorded srun runs (1 + requeues that ran)
  int64_t steps_done = 0;        // from the traces (all continuations)
  int64_t steps = 0;             // run.steps
  double final_loss = 0;         // the last step's; NaN without a step
  double tokens_per_second = 0;  // mean over the last trace's steps; 0 without one
  uint64_t planned_peak = 0;     // the plan's peak reserved, the highest rank
  uint64_t measured_peak = 0;    // the traces' highest step peak reserved, all ranks
  std::string plan_verdict;
  std::string note;  // e.g. a trace that could not be read
};

// Every task of the sweep; `slurm` may be empty (no job id, or sacct and
// squeue unavailable).
std::vector<TaskResult> collect_sweep(const SweepManifest& manifest,
                                      const std::map<int, SlurmTaskState>& slurm);

// The outcome word of a headroom exit code (docs/cli.md "Exit codes").
std::string outcome_of_exit_code(int rc);

// One table, a row per task: task, the varied keys, outcome, steps, final
// loss, tokens/s, planned and measured peak.
std::string format_results_table(const SweepManifest& manifest,
                                 const std::vector<TaskResult>& results);
// The same as CSV (RFC 4180 quoting), bytes as integers.
std::string format_results_csv(const SweepManifest& manifest,
                               const std::vector<TaskResult>& results);

}  // namespace headroom
