#include "sweep/resolve.h"

#include <cstdio>
#include <map>

#include "config/text.h"
#include "util/error.h"

namespace headroom {

std::string task_number(int index) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%03d", index);
  return buf;
}

std::vector<ResolvedTask> resolve_sweep_tasks(std::string_view toml_text,
                                              std::string_view source_name,
                                              const std::vector<std::string>& base_overrides,
                                              const std::vector<SweepTask>& tasks,
                                              const std::string& runs_dir,
                                              const std::vector<std::string>& extra_overrides) {
  // The base alone first: an error in it is one error, not one per task.
  const ExperimentConfig base =
      load_config_string(toml_text, source_name, base_overrides, SweepTable::kSkip);
  std::vector<ResolvedTask> resolved;
  std::string problems;
  size_t failed = 0;
  for (const SweepTask& task : tasks) {
    ResolvedTask r{task, base_overrides, {}};
    for (const std::string& o : task.overrides())
      r.overrides.push_back(o);
    r.overrides.push_back("run.name=" + toml_quote(base.run.name + "-" + task_number(task.index)));
    r.overrides.push_back("run.out_dir=" + toml_quote(runs_dir));
    for (const std::string& o : extra_overrides)
      r.overrides.push_back(o);
    try {
      r.config = load_config_string(toml_text, source_name, r.overrides, SweepTable::kSkip);
    } catch (const UsageError& e) {
      // Many tasks tend to fail alike: the first few say enough.
      if (++failed <= 8)
        problems += (problems.empty() ? "" : "\n") + std::string("task ") +
                    task_number(task.index) + " (" + task.describe() + "): " + e.what();
      continue;
    }
    resolved.push_back(std::move(r));
  }
  if (failed > 8)
    problems += "\n... and " + std::to_string(failed - 8) + " more tasks fail (" +
                std::to_string(failed) + " of " + std::to_string(tasks.size()) + ")";
  if (!problems.empty()) throw UsageError(problems);
  // Tasks run at once: a checkpoint folder shared by two would mix their steps.
  std::map<std::string, int> checkpoint_dirs;
  for (const ResolvedTask& r : resolved) {
    const std::string& dir = r.config.checkpoint.dir;
    if (dir.empty()) continue;
    auto [it, inserted] = checkpoint_dirs.emplace(dir, r.task.index);
    if (!inserted)
      throw UsageError(std::string(source_name) + ": checkpoint.dir = " + toml_quote(dir) +
                       " is shared by tasks " + task_number(it->second) + " and " +
                       task_number(r.task.index) +
                       ": leave it empty (each task's run folder gets its own checkpoints/) "
                       "or vary it");
  }
  return resolved;
}

}  // namespace headroom
