// Files that either replace their target completely or leave it as it was,
// and the wording of a failed write.
//
// Every writer goes through a temporary file beside the target (same folder,
// so the rename cannot cross filesystems), flushed to disk and renamed over
// the target. A reader therefore sees the old file or the whole new one,
// never a prefix, and a failed write (disk full, quota, permissions,
// RLIMIT_FSIZE) leaves the target byte-identical and no temporary behind.
// The temporary is "<path>.tmp-<pid>-<n>", created exclusively, so two
// writers of the same path (threads, processes) never share one.
//
// Errors are UsageErrors naming the path: where a run writes is the user's
// choice (run.out_dir, checkpoint.dir, OUT.h5), and so is a full disk.
//   results/run/config.toml: cannot write: No space left on device (disk full)
//
// Thread-safe (no shared state); a process killed mid-write may leave a
// temporary, never a truncated target.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace headroom {

// A streaming write of `path`: create, write (through write() or the
// temporary's own name), then commit(). Destroying it uncommitted, after an
// error or on purpose, removes the temporary and leaves `path` untouched.
class AtomicFileWriter {
 public:
  // Creates the temporary, open for writing, with mode 0666 minus the umask
  // like any other file the process creates. Throws UsageError naming `path`
  // when it cannot ("<path>: cannot create <temporary>: <reason>").
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  const std::string& path() const { return path_; }
  // The temporary's name, for a library that opens files by name (HDF5):
  // whatever it writes there is what commit() flushes and renames. Close
  // its handle before commit().
  const std::string& temp_path() const { return temp_path_; }

  // Appends all `nbytes` at `data` (a short write is continued, EINTR
  // retried). Throws UsageError "<path>: cannot write: <reason>".
  void write(const void* data, size_t nbytes);
  void write(std::string_view text) { write(text.data(), text.size()); }

  // Flushes the temporary to disk (a full disk may show only here: delayed
  // allocation, NFS, quotas), renames it over `path` and makes the rename
  // durable. Throws UsageError naming `path`; the temporary is removed when
  // it fails, so the object is then as if abandoned. At most once.
  void commit();
  bool committed() const { return committed_; }

 private:
  void remove_temporary() noexcept;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Replaces `path` with `contents` atomically (an AtomicFileWriter written
// whole and committed).
void write_file_atomically(const std::string& path, std::string_view contents);

// True for the errno values that mean "no room to write": ENOSPC (disk
// full), EDQUOT (quota), EFBIG (file size limit, RLIMIT_FSIZE included).
bool is_out_of_space(int error_number);

// "<path>: <what>: <strerror(error_number)>", plus " (disk full)" when
// is_out_of_space(error_number): the one wording every writer uses.
std::string file_error_message(const std::string& path, const std::string& what, int error_number);

// Throws UsageError(file_error_message(path, what, error_number)).
[[noreturn]] void throw_file_error(const std::string& path, const std::string& what,
                                   int error_number);

}  // namespace headroom
