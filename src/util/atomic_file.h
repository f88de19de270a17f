// Whole-file writes that either replace a file completely or leave it as it
// was, and the wording of a failed write.
//
// write_file_atomically(path, contents) writes `contents` to a temporary
// file beside `path` (same folder, so the rename cannot cross filesystems),
// flushes it to disk, and renames it over `path`. A reader therefore sees the
// old file or the whole new one, never a prefix, and a failed write (disk
// full, quota, permissions, RLIMIT_FSIZE) leaves `path` byte-identical and
// no temporary behind. The temporary is "<path>.tmp-<pid>-<n>", created
// exclusively, so two writers of the same path never share one.
//
// Errors are UsageErrors naming the path: where a run writes is the user's
// choice (run.out_dir, checkpoint.dir, OUT.h5), and so is a full disk.
//   results/run/config.toml: cannot write: No space left on device (disk full)
//
// Thread-safe (no shared state); a process killed mid-write may leave a
// temporary, never a truncated `path`.
#pragma once

#include <string>
#include <string_view>

namespace headroom {

// Replaces `path` with `contents` atomically, as described above. The file
// gets mode 0666 minus the umask, like any other file the process creates.
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
