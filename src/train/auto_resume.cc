#include "train/auto_resume.h"

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <utility>

#include "util/error.h"
#include "util/read_file.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

// A resolved config is a few kilobytes; more is not one of ours.
constexpr uint64_t kMaxConfigBytes = 1 << 20;

// N of a "step-N" folder name, or -1.
int64_t step_of(const std::string& name) {
  if (!name.starts_with("step-") || name.size() == 5 || name.size() > 5 + 15 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos)
    return -1;
  return std::stoll(name.substr(5));
}

// The text of `path`, or "" when it cannot be read (absent, not a file).
std::string text_or_empty(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "";
  try {
    return read_regular_file(path.string(), kMaxConfigBytes, "run config");
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

std::string run_identity(const ExperimentConfig& config) {
  ExperimentConfig c = config;
  c.checkpoint.resume = CheckpointSection{}.resume;
  c.checkpoint.resume_from = CheckpointSection{}.resume_from;
  return to_toml(c);
}

AutoResume find_auto_resume(const ExperimentConfig& config, const fs::path& run_dir,
                            const fs::path& checkpoint_dir) {
  AutoResume found;
  const std::string identity = run_identity(config);

  const fs::path folder_config = run_dir / "config.toml";
  const std::string text = text_or_empty(folder_config);
  if (!text.empty()) {
    try {
      found.folder_is_this_runs =
          run_identity(load_config_string(text, folder_config.string())) == identity;
    } catch (const Error&) {
      found.folder_is_this_runs = false;  // not a config this build reads: another run's
    }
  }

  std::vector<std::pair<int64_t, fs::path>> folders;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint_dir, ec)) {
    const int64_t step = step_of(entry.path().filename().string());
    std::error_code type_ec;
    if (step >= 0 && entry.is_directory(type_ec)) folders.emplace_back(step, entry.path());
  }
  std::sort(folders.begin(), folders.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [step, dir] : folders) {
    TrainState state;
    try {
      state = read_train_state(dir.string());
    } catch (const Error&) {
      found.passed_over.push_back(dir.string() +
                                  ": incomplete (no readable trainer_state.json: a save that did "
                                  "not finish)");
      continue;
    }
    if (state.step != step) {
      found.passed_over.push_back(dir.string() + ": its trainer_state.json says step " +
                                  std::to_string(state.step));
      continue;
    }
    const std::string written_by = text_or_empty(dir / kRunConfigFile);
    if (written_by != identity) {
      found.passed_over.push_back(
          dir.string() + (written_by.empty() ? ": has no " + std::string(kRunConfigFile) +
                                                   " (not saved by a run of this build)"
                                             : ": written with another config (its " +
                                                   std::string(kRunConfigFile) + " differs)"));
      continue;
    }
    found.checkpoint = dir.string();
    found.state = state;
    break;
  }
  return found;
}

}  // namespace headroom
