// A disk that fills up, for the "full disk" tests: a small tmpfs mounted on
// a folder when the tests run as root and may mount (CI does), otherwise a
// file size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so the write fails with
// EFBIG instead of killing the process), which headroom must report the same
// way. A test asks for both and runs what it gets; skip() says why neither
// works.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

namespace headroom::testing {

enum class FullDiskKind { kTmpfs, kFileSizeLimit };

inline const char* name_of(FullDiskKind kind) {
  return kind == FullDiskKind::kTmpfs ? "tmpfs" : "rlimit";
}

// Names the instances of a test parameterized by FullDiskKind.
inline std::string kind_name(const ::testing::TestParamInfo<FullDiskKind>& kind) {
  return name_of(kind.param);
}

class SmallDisk {
 public:
  // A folder `dir` (created) that holds at most `bytes`: the whole tmpfs, or
  // (kFileSizeLimit) each file, once limit_this_process() or shell_prefix()
  // applies the limit.
  SmallDisk(std::filesystem::path dir, uint64_t bytes, FullDiskKind kind)
      : dir_(std::move(dir)), bytes_(bytes), kind_(kind) {
    std::filesystem::create_directories(dir_);
    if (kind_ == FullDiskKind::kTmpfs) {
      if (::geteuid() != 0) {
        why_not_ = "not root: cannot mount a tmpfs";
        return;
      }
      const std::string options = "size=" + std::to_string(bytes_);
      if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
        why_not_ = std::string("mount tmpfs: ") + std::strerror(errno);
        return;
      }
      mounted_ = true;
    } else if (std::system("ulimit -f 1 2>/dev/null") != 0) {
      why_not_ = "the shell cannot set a file size limit (ulimit -f)";
    }
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  // Empty when the disk works; else why (for GTEST_SKIP).
  const std::string& why_not() const { return why_not_; }
  const std::filesystem::path& dir() const { return dir_; }
  FullDiskKind kind() const { return kind_; }

  // Goes before a command run through the shell: nothing for the tmpfs;
  // for the file size limit, `ulimit -f` (512-byte blocks) with SIGXFSZ
  // ignored, which the command inherits.
  std::string shell_prefix() const {
    if (kind_ == FullDiskKind::kTmpfs) return "";
    return "trap '' XFSZ; ulimit -f " + std::to_string(bytes_ / 512) + "; ";
  }

  // For a forked child: caps every file it writes at `limit` bytes.
  static void limit_this_process(uint64_t limit) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit r {};
    r.rlim_cur = r.rlim_max = limit;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }

 private:
  std::filesystem::path dir_;
  uint64_t bytes_;
  FullDiskKind kind_;
  bool mounted_ = false;
  std::string why_not_;
};

}  // namespace headroom::testing
