// RunFolder: a run's folder (<run.out_dir>/<run.name>/) while one command
// writes into it, so that a failed or concurrent command never destroys what
// an earlier run left there.
//
// The contract, for `train` and `plan` alike:
//  - One writer at a time. The lead rank takes an exclusive flock on a lock
//    file in the folder (".train.lock" or ".plan.lock": a plan may run beside
//    a live training, two trainings may not). The kernel drops the lock when
//    the process ends, however it ends, so a killed run never blocks the
//    next; a second command meanwhile is refused naming the folder and the
//    holder's pid — with or without --overwrite.
//  - Nothing is replaced until the run has really started. Every file the
//    command writes under its final name is first written under a staged
//    name beside it ("<name>.staging-<kind>-<pid>"); commit() renames them
//    all into place (replacing an earlier run's) and removes the files of
//    the earlier run that this one makes stale. A command that fails before
//    commit() leaves the folder exactly as it found it: the destructor
//    removes the staged files. The caller commits once the run has a result:
//    after its first step, before its first checkpoint, or when it ran out
//    of memory.
//  - Staged files a killed command left behind (same kind) are removed when
//    the next command of that kind takes the lock.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace headroom {

class RunFolder {
 public:
  enum class Kind { kTrain, kPlan };

  // The lead rank's folder: creates `dir` (and its parents) if needed, takes
  // the lock and clears stale staged files. Throws UsageError naming `dir`
  // (and `key`, the config key the folder comes from) when it cannot be
  // created or when another live command holds the lock.
  static RunFolder lead(const std::filesystem::path& dir, Kind kind, const std::string& key);
  // Another rank of the lead's job: stages and commits its own files in the
  // folder the lead has locked (call it after the lead's barrier).
  static RunFolder follower(const std::filesystem::path& dir, Kind kind);

  RunFolder(RunFolder&& other) noexcept;
  RunFolder& operator=(RunFolder&&) = delete;
  RunFolder(const RunFolder&) = delete;
  ~RunFolder();  // without commit(): removes the staged files; releases the lock

  const std::filesystem::path& dir() const { return dir_; }

  // The path to write `name` (a file directly in the folder) to until
  // commit(). The staged file is created by the caller.
  std::filesystem::path stage(const std::string& name);

  // A file or folder of the earlier run that commit() removes because this
  // run makes it stale (an extra rank's trace, a continuation's trace, an
  // overwritten run's checkpoints). Paths may lie outside the folder.
  void replace_on_commit(std::filesystem::path stale);

  // Renames every staged file onto its final name, then removes what
  // replace_on_commit() named. Idempotent. Throws UsageError naming the
  // file when a rename or removal fails.
  void commit();
  bool committed() const { return committed_; }

 private:
  RunFolder(std::filesystem::path dir, Kind kind, int lock_fd);

  std::filesystem::path dir_;
  Kind kind_;
  int lock_fd_ = -1;  // -1: a follower, or moved from
  bool committed_ = false;
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> staged_;  // staged, final
  std::vector<std::filesystem::path> stale_;
};

// The checks a path from the config gets before the run writes anything, so
// a filesystem error reaches the user naming the key instead of as an
// internal error: each throws UsageError "<key> = "<path>": <what>" (a path
// longer than a line is shown by its first characters and its length).

// True when `path` exists (following symlinks); a symlink loop, a name too
// long or a component that is not a folder is an error.
bool path_exists(const std::string& key, const std::filesystem::path& path);

// `path` is an existing regular file (or a symlink to one).
void require_regular_file(const std::string& key, const std::filesystem::path& path);

// `path` is a folder this process can create files in, made (with its
// parents) when missing: checked by creating and removing a probe file.
void require_writable_folder(const std::string& key, const std::filesystem::path& path);

// `"<path>"` quoted for a message, cut to its first 120 characters with the
// full length given when longer.
std::string quote_path(const std::filesystem::path& path);

}  // namespace headroom
