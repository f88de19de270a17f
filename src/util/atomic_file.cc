#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

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

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  // O_EXCL under a name with this process's id: a concurrent writer (or a
  // temporary left by a killed one) makes us pick the next name instead of
  // sharing a file, without any counter shared between writers.
  constexpr int kAttempts = 100;
  const std::string stem = path_ + ".tmp-" + std::to_string(::getpid()) + "-";
  for (int n = 0; n < kAttempts; ++n) {
    temp_path_ = stem + std::to_string(n);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) throw_file_error(path_, "cannot create " + temp_path_, errno);
  }
  throw UsageError(path_ + ": cannot create a temporary beside it: " + stem + "0.." +
                   std::to_string(kAttempts - 1) + " all exist");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) remove_temporary();
}

void AtomicFileWriter::remove_temporary() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  HR_CHECK(fd_ >= 0, "write to " + path_ + " after commit() or a failed commit()");
  const char* next = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t put = ::write(fd_, next, nbytes);
    if (put < 0) {
      if (errno == EINTR) continue;
      throw_file_error(path_, "cannot write", errno);
    }
    // A short write on a filling disk: the next call reports why.
    next += put;
    nbytes -= static_cast<size_t>(put);
  }
}

void AtomicFileWriter::commit() {
  HR_CHECK(fd_ >= 0, "commit() of " + path_ + " twice, or after a failed commit()");
  // Every failure below ends here: the temporary goes, `path` is untouched.
  auto fail = [&](const std::string& what, int error_number) {
    remove_temporary();
    throw_file_error(path_, what, error_number);
  };
  // Without fsync a machine crash after the rename can leave an empty file
  // under the real name (delayed allocation on ext4/xfs). fsync flushes the
  // file, not the descriptor: it covers what a library wrote by name too.
  int error_number = ::fsync(fd_) != 0 ? errno : 0;
  if (::close(fd_) != 0 && error_number == 0) error_number = errno;
  fd_ = -1;
  if (error_number != 0) fail("cannot write", error_number);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    fail("cannot rename " + temp_path_ + " into place", errno);
  committed_ = true;
  // Make the rename durable too; the file is complete either way, so a
  // failure here is not worth an error.
  const std::string folder = std::filesystem::path(path_).parent_path().string();
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFileWriter file(path);
  file.write(contents);
  file.commit();
}

}  // namespace headroom
