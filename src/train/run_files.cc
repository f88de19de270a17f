#include "train/run_files.h"

#include <algorithm>
#include <system_error>

namespace fs = std::filesystem;

namespace headroom {

namespace {

bool is_checkpoint_folder(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.starts_with("step-") && name.size() > 5 &&
         name.find_first_not_of("0123456789", 5) == std::string::npos;
}

}  // namespace

RunFiles run_files(RunFolder::Kind kind, const fs::path& run_dir, const fs::path& checkpoint_dir,
                   bool resuming, int64_t resume_step, int rank, int world_size) {
  const bool plan = kind == RunFolder::Kind::kPlan;
  RunFiles files;
  const std::string rank_name = "rank" + std::to_string(rank);
  const std::string from = "from-step-" + std::to_string(resume_step);
  if (plan) {
    files.config = "plan.config.toml";
    files.trace = "plan." + rank_name + ".h5";
  } else if (resuming) {
    files.config = "config." + from + ".toml";
    files.trace = "trace." + rank_name + "." + from + ".h5";
  } else {
    files.config = "config.toml";
    files.trace = "trace." + rank_name + ".h5";
  }
  // What this run's files are named for every rank: "trace.rank<R>.h5"
  // splits into "trace.rank" + R + ".h5" (R < world_size: replaced in place).
  const std::string prefix = plan ? "plan.rank" : "trace.rank";
  const std::string suffix = resuming ? "." + from + ".h5" : ".h5";
  auto rank_of = [&](const std::string& name) -> int64_t {
    if (!name.starts_with(prefix) || !name.ends_with(suffix)) return -1;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoll(digits);
  };
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".staging-") != std::string::npos) continue;
    const int64_t r = rank_of(name);
    if (r >= 0) {
      files.earlier.push_back(entry.path());
      if (r >= world_size) files.stale.push_back(entry.path());
      continue;
    }
    // A fresh training replaces the whole earlier run, continuations included.
    if (!plan && !resuming &&
        ((name.starts_with("trace.rank") && name.find(".from-step-") != std::string::npos) ||
         (name.starts_with("config.from-step-") && name.ends_with(".toml")))) {
      files.earlier.push_back(entry.path());
      files.stale.push_back(entry.path());
    }
  }
  if (!plan && !resuming)
    for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint_dir, ec))
      if (entry.is_directory(ec) && is_checkpoint_folder(entry.path())) {
        files.earlier.push_back(entry.path());
        files.stale.push_back(entry.path());
      }
  std::sort(files.earlier.begin(), files.earlier.end());
  return files;
}

}  // namespace headroom
