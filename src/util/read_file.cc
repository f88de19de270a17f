#include "util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace headroom {

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string too_large(const std::string& name, std::string_view what, const std::string& size,
                      uint64_t max_bytes) {
  return name + ": " + std::string(what) + " is " + size + "; at most " +
         format_bytes_exact(max_bytes) + " of a " + std::string(what) + " is read";
}

}  // namespace

std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw UsageError(path + ": cannot open " + std::string(what) + ": " + std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw UsageError(path + ": cannot stat " + std::string(what) + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw UsageError(path + ": " + std::string(what) + " is " + kind_of(st.st_mode) +
                     ": expected a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw UsageError(too_large(path, what, format_bytes_exact(size), max_bytes));
  std::string text(static_cast<size_t>(size), '\0');
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      // The file may have grown since fstat: read on, within the bound.
      if (text.size() >= max_bytes + 1) break;
      text.resize(std::min<uint64_t>(max_bytes + 1, text.size() + 65536));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw UsageError(path + ": cannot read " + std::string(what) + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes)
    throw UsageError(
        too_large(path, what, "more than " + format_bytes_exact(max_bytes), max_bytes));
  text.resize(got);
  return text;
}

std::string read_stream(std::FILE* stream, const std::string& name, uint64_t max_bytes,
                        std::string_view what) {
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, stream)) > 0) {
    if (text.size() + n > max_bytes)
      throw UsageError(
          too_large(name, what, "more than " + format_bytes_exact(max_bytes), max_bytes));
    text.append(buffer, n);
  }
  if (std::ferror(stream))
    throw UsageError(name + ": cannot read " + std::string(what) + ": " + std::strerror(errno));
  return text;
}

}  // namespace headroom
