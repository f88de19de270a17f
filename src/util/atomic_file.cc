#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace headroom {

bool is_out_of_space(int error_number) {
  return error_number == ENOSPC || error_number == EDQUOT || error_number == EFBIG;
}

std::string file_error_message(const std::string& path, const std::string& what, int error_number) {
  std::string message = path + ": " + what + ": " + std::strerror(error_number);
  if (is_out_of_space(error_number)) message += " (disk full)";
  return message;
}

void throw_file_error(const std::string& path, const std::string& what, int error_number) {
  throw UsageError(file_error_message(path, what, error_number));
}

namespace {

// The temporary beside `path`, open for writing. Created with O_EXCL under a
// name with this process's id, so a concurrent writer (or a temporary left
// by a killed one) makes us pick the next name instead of sharing a file.
int create_temporary(const std::string& path, std::string& temp) {
  constexpr int kAttempts = 100;
  const std::string stem = path + ".tmp-" + std::to_string(::getpid()) + "-";
  for (int n = 0; n < kAttempts; ++n) {
    temp = stem + std::to_string(n);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw_file_error(path, "cannot create " + temp, errno);
  }
  throw UsageError(path + ": cannot create a temporary beside it: " + stem + "0.." +
                   std::to_string(kAttempts - 1) + " all exist");
}

// Writes all of `contents`, returning 0 or the errno of the failed call.
int write_all(int fd, std::string_view contents) {
  const char* next = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t put = ::write(fd, next, left);
    if (put < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    // A short write on a filling disk: the next call reports why.
    next += put;
    left -= static_cast<size_t>(put);
  }
  return 0;
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  std::string temp;
  const int fd = create_temporary(path, temp);
  // Every failure below ends here: the temporary goes, `path` is untouched.
  auto fail = [&](const std::string& what, int error_number) {
    ::unlink(temp.c_str());
    throw_file_error(path, what, error_number);
  };
  int error_number = write_all(fd, contents);
  // Without fsync a machine crash after the rename can leave an empty file
  // under the real name (delayed allocation on ext4/xfs); NFS and quotas may
  // also report a full disk only here or at close.
  if (error_number == 0 && ::fsync(fd) != 0) error_number = errno;
  if (::close(fd) != 0 && error_number == 0) error_number = errno;
  if (error_number != 0) fail("cannot write", error_number);
  if (::rename(temp.c_str(), path.c_str()) != 0)
    fail("cannot rename " + temp + " into place", errno);
  // Make the rename durable too; the file is complete either way, so a
  // failure here is not worth an error.
  const std::string folder = std::filesystem::path(path).parent_path().string();
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace headroom
