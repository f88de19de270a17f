#include "train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

const char* lock_name(RunFolder::Kind kind) {
  return kind == RunFolder::Kind::kTrain ? ".train.lock" : ".plan.lock";
}

std::string staging_marker(RunFolder::Kind kind) {
  return kind == RunFolder::Kind::kTrain ? ".staging-train-" : ".staging-plan-";
}

[[noreturn]] void path_error(const std::string& key, const fs::path& path,
                             const std::string& what) {
  throw UsageError(key + " = " + quote_path(path) + ": " + what);
}

// The message of a failed filesystem call, without the paths that
// std::filesystem_error repeats (the caller names the path once).
std::string reason(const std::error_code& ec) {
  if (ec == std::errc::too_many_symbolic_link_levels) return "a symlink loop";
  if (ec == std::errc::filename_too_long) return "the name is too long for the filesystem";
  return ec.message();
}

// `path` as a folder: made (with its parents) when missing; a file there, a
// loop or a name too long is an error naming `key`.
void make_folder(const std::string& key, const fs::path& path, const std::string& what) {
  if (path_exists(key, path)) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) path_error(key, path, "exists and is not a folder");
    return;
  }
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) path_error(key, path, "cannot create " + what + ": " + reason(ec));
}

}  // namespace

std::string quote_path(const fs::path& path) {
  constexpr size_t kShown = 120;
  const std::string& text = path.native();
  if (text.size() <= kShown) return "\"" + text + "\"";
  return "\"" + text.substr(0, kShown) + "...\" (" + std::to_string(text.size()) + " characters)";
}

bool path_exists(const std::string& key, const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) path_error(key, path, reason(ec));
  return fs::exists(status);
}

void require_regular_file(const std::string& key, const fs::path& path) {
  if (!path_exists(key, path)) path_error(key, path, "no such file");
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    path_error(
        key, path,
        fs::is_directory(path, ec) ? "is a folder, expected a file" : "is not a regular file");
}

void require_writable_folder(const std::string& key, const fs::path& path) {
  make_folder(key, path, "the folder");
  // Permissions alone do not answer it (root, read-only mounts, quotas):
  // creating a file does.
  const fs::path probe = path / (".headroom-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    path_error(key, path, std::string("cannot create files in it: ") + std::strerror(errno));
  ::close(fd);
  std::error_code ignored;
  fs::remove(probe, ignored);
}

RunFolder::RunFolder(fs::path dir, Kind kind, int lock_fd)
    : dir_(std::move(dir)), kind_(kind), lock_fd_(lock_fd) {}

RunFolder::RunFolder(RunFolder&& other) noexcept
    : dir_(std::move(other.dir_)),
      kind_(other.kind_),
      lock_fd_(std::exchange(other.lock_fd_, -1)),
      committed_(other.committed_),
      staged_(std::move(other.staged_)),
      stale_(std::move(other.stale_)) {
  other.committed_ = true;  // the moved-from object removes nothing
}

RunFolder RunFolder::lead(const fs::path& dir, Kind kind, const std::string& key) {
  make_folder(key, dir, "the run folder");
  const fs::path lock_path = dir / lock_name(kind);
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    path_error(key, dir,
               "cannot create " + lock_path.filename().string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    std::string holder;
    std::getline(std::ifstream(lock_path), holder);
    ::close(fd);
    if (error == EWOULDBLOCK)
      path_error(key, dir,
                 std::string("in use by another headroom ") +
                     (kind == Kind::kTrain ? "train" : "plan") +
                     (holder.empty() ? "" : " (" + holder + ")") +
                     ": wait for it to end, or choose another name with --set run.name=<name>");
    path_error(key, dir,
               "cannot lock " + lock_path.filename().string() + ": " + std::strerror(error));
  }
  // Who holds it, for the message a second command prints.
  const std::string me = "pid " + std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0) {
    const ssize_t written = ::pwrite(fd, me.data(), me.size(), 0);
    (void)written;  // only a courtesy for the message above
  }
  RunFolder folder(dir, kind, fd);
  // Staged files of a command of this kind that was killed: nobody else of
  // this kind can be writing now, since we hold the lock and our own job's
  // other ranks stage only after the lead's barrier.
  const std::string marker = staging_marker(kind);
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().find(marker) == std::string::npos) continue;
    std::error_code ignored;
    fs::remove(entry.path(), ignored);
  }
  return folder;
}

RunFolder RunFolder::follower(const fs::path& dir, Kind kind) {
  return RunFolder(dir, kind, -1);
}

RunFolder::~RunFolder() {
  if (!committed_)
    for (const auto& [staged, final_path] : staged_) {
      std::error_code ignored;
      fs::remove(staged, ignored);
    }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

fs::path RunFolder::stage(const std::string& name) {
  fs::path staged = dir_ / (name + staging_marker(kind_) + std::to_string(::getpid()));
  staged_.emplace_back(staged, dir_ / name);
  return staged;
}

void RunFolder::replace_on_commit(fs::path stale) {
  stale_.push_back(std::move(stale));
}

void RunFolder::commit() {
  if (committed_) return;
  committed_ = true;
  for (const auto& [staged, final_path] : staged_) {
    std::error_code ec;
    fs::rename(staged, final_path, ec);
    if (ec)
      throw UsageError(final_path.string() +
                       ": cannot move the new file into place: " + reason(ec));
  }
  for (const fs::path& stale : stale_) {
    std::error_code ec;
    fs::remove_all(stale, ec);
    if (ec)
      throw UsageError(stale.string() + ": cannot remove (left by the earlier run): " + reason(ec));
  }
}

}  // namespace headroom
