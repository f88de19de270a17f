// A sweep: a base experiment plus the keys that vary, from the file's
// [sweep] table and the command line's --grid / --zip (docs/config.md
// "Sweeps"), expanded into tasks.
//
//   [sweep]                          # grid: every combination
//   "zero.stage" = [2, 3]
//   "lora.rank" = [8, 16, 64]
//   [sweep.zip]                      # zipped: varied together, equal lengths
//   "optimizer.lr" = [1e-3, 3e-4]
//   "schedule.warmup_steps" = [10, 20]
//   [sweep.slurm]                    # the job shape of every task
//   nodes = 1
//   tasks_per_node = 4
//
// Each grid key is one axis, the zip group (when given) one more; the tasks
// are their product, the first axis varying slowest (as nested loops read).
// A task's values are applied as `--set key=value` overrides after the
// file, so every value goes through the loader like any other override.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// One value of a varied key: TOML text that `--set key=<text>` reads back
// (`3`, `"causal"`, `["q_proj", "v_proj"]`), and where it was given.
struct SweepValue {
  std::string text;
  std::string where;  // "exp.toml:12:16" or "--grid zero.stage=2,3"
};

struct SweepKey {
  std::string name;   // "zero.stage"
  std::string where;  // the key's position: "exp.toml:12:1" or "--grid zero.stage=2,3"
  std::vector<SweepValue> values;
};

// The Slurm job shape shared by every task of the sweep ([sweep.slurm]).
// The ranks of a task are nodes x tasks_per_node; each is planned.
struct SlurmShape {
  int nodes = 1;
  int tasks_per_node = 1;
  int gpus_per_task = -1;  // -1: 1 when run.backend = "cuda", else none requested
  int cpus_per_task = 0;   // 0: not requested (Slurm's default)
  std::string time;        // --time, e.g. "02:00:00"; "" = the partition's default
  std::string partition;   // "" = the cluster's default
  std::string account;
  std::vector<std::string> options;  // more sbatch options, e.g. "--qos=high"

  int ranks() const { return nodes * tasks_per_node; }
};

struct SweepSpec {
  std::vector<SweepKey> grid;  // one axis each, in the order given
  std::vector<SweepKey> zip;   // one axis together; every key has the same number of values
  SlurmShape slurm;

  size_t num_tasks() const;
  bool empty() const { return grid.empty() && zip.empty(); }
};

// The [sweep] table of the TOML text (an empty spec when there is none).
// Keys are written quoted ("zero.stage") or as TOML dotted keys
// (zero.stage = [...], i.e. a nested table); `zip` and `slurm` are its
// subtables. Checks every key against the config schema and every value
// with that key's own check, and throws one UsageError listing each
// problem at its position: `exp.toml:12:1: sweep: zero.stag: unknown key
// (did you mean "zero.stage"?)`, `exp.toml:12:18: sweep: zero.stage = 5:
// expected an integer in 0..3, got 5`. TOML syntax errors are left to the
// config loader, which reports them first.
SweepSpec parse_sweep_table(std::string_view toml_text, std::string_view source_name);

// --grid key=v1,v2,... and --zip key=v1,v2,... (values split at commas
// outside brackets and quotes, each read as a --set value) added to `spec`;
// a key the file already varies is replaced (the command line wins, as
// --set over the file). Throws UsageError naming the argument.
void add_sweep_arguments(SweepSpec& spec, const std::vector<std::string>& grid,
                         const std::vector<std::string>& zip);

// One task: its number and its value of each varied key, in axis order.
struct SweepTask {
  int index = 0;
  std::vector<std::string> keys;   // the varied keys, grid then zip
  std::vector<SweepValue> values;  // one per key

  // "zero.stage=3", ...: what the loader applies after the file.
  std::vector<std::string> overrides() const;
  // "zero.stage=3 lora.rank=64", for messages.
  std::string describe() const;
};

// Every task (num_tasks() of them, numbered from 0), product of the axes.
// A spec with no key gives one task, the base experiment.
std::vector<SweepTask> expand_sweep(const SweepSpec& spec);

// The most tasks a sweep may have: Slurm's default MaxArraySize is 1001
// (indices 0..1000), and tasks are named 000..999.
inline constexpr size_t kMaxSweepTasks = 1000;

}  // namespace headroom
