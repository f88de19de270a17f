// checkpoint.resume = "auto": which checkpoint a requeued run continues
// from, decided by reading the folders alone (before anything is written).
//
// A run's identity is its resolved config with checkpoint.resume and
// checkpoint.resume_from set aside (run_identity): the same config trains
// the same numbers, bit for bit, so any checkpoint it wrote is a valid place
// to continue from, and a checkpoint of any other config is not. Every
// checkpoint a training saves carries that text in run_config.toml, and a
// checkpoint is complete once its trainer_state.json (written last, after
// every weights and optimizer file) is in place.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/train_state.h"

namespace headroom {

// The file of a checkpoint folder that names the config that wrote it.
inline constexpr const char* kRunConfigFile = "run_config.toml";

// to_toml(config) with checkpoint.resume and checkpoint.resume_from at their
// defaults: what two attempts of one run have in common.
std::string run_identity(const ExperimentConfig& config);

struct AutoResume {
  std::string checkpoint;  // the newest complete checkpoint of this config; "" = start afresh
  TrainState state;        // checkpoint's trainer_state.json
  // <run_dir>/config.toml exists and has this config's identity: the folder
  // holds an earlier attempt of this same run, whose files a fresh start may
  // replace without --overwrite.
  bool folder_is_this_runs = false;
  // Newer step-N folders that were passed over, "<dir>: <why>" (a save that
  // did not finish, another config), for the run to print.
  std::vector<std::string> passed_over;
};

// Looks at `checkpoint_dir`'s step-N folders, newest (highest N) first, and
// at `run_dir`/config.toml. Reads only; a missing folder holds nothing.
AutoResume find_auto_resume(const ExperimentConfig& config, const std::filesystem::path& run_dir,
                            const std::filesystem::path& checkpoint_dir);

}  // namespace headroom
