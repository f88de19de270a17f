// The files of one rank's run in its folder (<run.out_dir>/<run.name>/),
// and what an earlier run left there that this one would replace or make
// stale: what --overwrite is asked for, and what RunFolder::commit removes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "train/run_folder.h"

namespace headroom {

struct RunFiles {
  std::string
      config;         // written by the lead: config.toml, config.from-step-N.toml, plan.config.toml
  std::string trace;  // this rank's: trace.rank<R>[.from-step-N].h5, plan.rank<R>.h5
  std::vector<std::filesystem::path> earlier;  // present now: refused without --overwrite (sorted)
  std::vector<std::filesystem::path> stale;    // of `earlier`, what the new files do not replace
};

// The names for rank `rank` of `world_size` of a `kind` run (a training
// resumed from step `resume_step` when `resuming`), and the earlier run's
// files in `run_dir` and, for a fresh training, its step-N folders in
// `checkpoint_dir`: a later "resume from the latest" must not pick a
// checkpoint of the run this one replaced. Staged files of other commands
// are not counted. Folders that do not exist hold nothing.
RunFiles run_files(RunFolder::Kind kind, const std::filesystem::path& run_dir,
                   const std::filesystem::path& checkpoint_dir, bool resuming, int64_t resume_step,
                   int rank, int world_size);

}  // namespace headroom
