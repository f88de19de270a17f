// The sbatch script of a sweep: slurm/sweep.sbatch.in (embedded in the
// binary at build time) with the sweep's values put in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sweep/sweep_spec.h"

namespace headroom {

struct SbatchParams {
  std::string dir;         // the sweep folder (absolute)
  std::string workdir;     // --chdir: where the sweep was made
  std::string job_name;    // --job-name
  std::string headroom;    // the binary (absolute)
  std::vector<int> tasks;  // the array's task indices
  int parallel = 0;        // %P; 0 = no cap
  SlurmShape shape;
  bool cuda = false;  // run.backend = "cuda": one GPU per task unless gpus_per_task says
  int signal_lead = 120;
  int max_requeues = 3;
  std::vector<std::string> train_options;  // after the task file, e.g. --set checkpoint.resume=auto
};

// "0-2,5,7-9%4": `tasks` (increasing) as Slurm's --array list, runs of
// consecutive indices as ranges, "%P" when parallel > 0.
std::string array_spec(const std::vector<int>& tasks, int parallel);

// The template with every {{name}} replaced. Throws UsageError when a path
// or option cannot go into an #SBATCH line (whitespace, quotes, a newline),
// InternalError for a placeholder it does not know (a broken template).
std::string render_sbatch(std::string_view template_text, const SbatchParams& params);

// The template built into this binary (slurm/sweep.sbatch.in).
std::string_view embedded_sbatch_template();

}  // namespace headroom
