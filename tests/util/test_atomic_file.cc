// util/atomic_file.h: a commit replaces the target whole, anything else
// leaves it byte-identical with no temporary beside it, concurrent writers
// never share a temporary, and a full disk (tmpfs or RLIMIT_FSIZE) is
// reported naming the target. write_file_atomically on a full disk is
// tested with the commands in tests/cli/disk_full_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util/small_disk.h"
#include "test_util/temp_dir.h"
#include "test_util/temporaries.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::FullDiskKind;
using testing::SmallDisk;
using testing::TempDir;
using testing::temporaries_of;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(AtomicFileWriter, CommitReplacesTheTargetWhole) {
  TempDir dir;
  const std::string path = dir.file("weights.bin");
  write_file_atomically(path, "old");
  AtomicFileWriter file(path);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(file.temp_path().rfind(path + ".tmp-" + std::to_string(::getpid()) + "-", 0), 0u)
      << file.temp_path();
  file.write("new ");
  const std::string big(3 << 20, 'z');
  file.write(big.data(), big.size());
  EXPECT_EQ(slurp(path), "old") << "replaced before commit()";
  EXPECT_FALSE(file.committed());
  file.commit();
  EXPECT_TRUE(file.committed());
  EXPECT_EQ(slurp(path), "new " + big);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"weights.bin"});
}

// What HDF5 does: open the temporary by name and write through its own
// descriptor. commit() flushes and renames what it wrote.
TEST(AtomicFileWriter, ALibraryMayWriteTheTemporaryByName) {
  TempDir dir;
  const std::string path = dir.file("data.h5");
  AtomicFileWriter file(path);
  {
    std::ofstream out(file.temp_path(), std::ios::binary | std::ios::trunc);
    out << "written by name";
  }
  file.commit();
  EXPECT_EQ(slurp(path), "written by name");
  EXPECT_TRUE(temporaries_of(path).empty());
}

TEST(AtomicFileWriter, AbandonedLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const std::string path = dir.file("config.json");
  write_file_atomically(path, "{\"old\": true}\n");
  {
    AtomicFileWriter file(path);
    file.write("{\"new\":");
    EXPECT_EQ(temporaries_of(path).size(), 1u);
  }
  EXPECT_EQ(slurp(path), "{\"old\": true}\n");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"config.json"});
  // And with no old file: nothing at all.
  {
    AtomicFileWriter fresh(dir.file("fresh.json"));
    fresh.write("x");
  }
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"config.json"});
}

TEST(AtomicFileWriter, WritersOfOnePathDoNotShareATemporary) {
  TempDir dir;
  const std::string path = dir.file("shared.txt");
  // Eight at once, created from eight threads.
  std::vector<std::optional<AtomicFileWriter>> writers(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < writers.size(); ++i)
    threads.emplace_back([&, i] { writers[i].emplace(path); });
  for (std::thread& t : threads)
    t.join();
  std::set<std::string> temps;
  for (const auto& w : writers)
    temps.insert(w->temp_path());
  EXPECT_EQ(temps.size(), writers.size());
  EXPECT_EQ(temporaries_of(path).size(), writers.size());
  // Each writes its own contents; the last commit wins whole, and the
  // others' temporaries are untouched by it until they go.
  for (size_t i = 0; i < writers.size(); ++i)
    writers[i]->write("writer " + std::to_string(i));
  writers[3]->commit();
  EXPECT_EQ(slurp(path), "writer 3");
  writers[5]->commit();
  EXPECT_EQ(slurp(path), "writer 5");
  writers.clear();
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"shared.txt"});
}

// A temporary left by a killed process of the same pid is skipped, not
// reused (and not removed: it may be a live writer's).
TEST(AtomicFileWriter, AnExistingTemporaryIsNotReused) {
  TempDir dir;
  const std::string path = dir.file("a.txt");
  const std::string stale = path + ".tmp-" + std::to_string(::getpid()) + "-0";
  write_file_atomically(stale, "stale");
  AtomicFileWriter file(path);
  EXPECT_NE(file.temp_path(), stale);
  file.write("fresh");
  file.commit();
  EXPECT_EQ(slurp(path), "fresh");
  EXPECT_EQ(slurp(stale), "stale");
}

TEST(AtomicFileWriter, ErrorsNameTheTarget) {
  TempDir dir;
  const std::string missing = dir.file("no-such-folder/x.bin");
  const std::string message = usage_error([&] { AtomicFileWriter file(missing); });
  EXPECT_EQ(message.rfind(missing + ": cannot create " + missing + ".tmp-", 0), 0u) << message;
  EXPECT_NE(message.find(": No such file or directory"), std::string::npos) << message;

  // A folder in the way: the rename fails, the temporary goes.
  const std::string folder = dir.file("taken");
  std::filesystem::create_directories(folder + "/inside");
  AtomicFileWriter file(folder);
  file.write("x");
  EXPECT_EQ(usage_error([&] { file.commit(); }),
            folder + ": cannot rename " + file.temp_path() + " into place: Is a directory");
  EXPECT_FALSE(file.committed());
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"taken"});
  EXPECT_THROW(file.commit(), InternalError);
  EXPECT_THROW(file.write("y"), InternalError);
}

// ---- a full disk ---------------------------------------------------------------

class AtomicFileWriterDiskFull : public ::testing::TestWithParam<FullDiskKind> {
 protected:
  TempDir scratch_;
};

// Streams 64 KiB parts into a 256 KiB disk until the write fails. Under a
// file size limit, in a forked child so the limit stays out of this
// process; the child's exit code says whether it saw the expected message.
TEST_P(AtomicFileWriterDiskFull, ReportsThePathAndLeavesTheOldFile) {
  constexpr uint64_t kDisk = 256 * 1024;
  SmallDisk disk(scratch_.file("disk"), kDisk, GetParam());
  if (!disk.why_not().empty()) GTEST_SKIP() << name_of(GetParam()) << ": " << disk.why_not();
  const std::string path = (disk.dir() / "model.safetensors").string();
  write_file_atomically(path, "old weights");
  const auto stream_until_full = [&path] {
    AtomicFileWriter file(path);
    const std::string part(64 * 1024, 'w');
    for (int i = 0; i < 64; ++i)  // 4 MiB, far past the disk
      file.write(part.data(), part.size());
    file.commit();
  };
  if (GetParam() == FullDiskKind::kTmpfs) {
    EXPECT_EQ(usage_error(stream_until_full),
              path + ": cannot write: No space left on device (disk full)");
  } else {
    const pid_t child = ::fork();
    if (child == 0) {
      SmallDisk::limit_this_process(kDisk);
      std::string message;
      try {
        stream_until_full();
      } catch (const UsageError& e) {
        message = e.what();
      }
      _exit(message == path + ": cannot write: File too large (disk full)" ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  EXPECT_EQ(slurp(path), "old weights");
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(disk.dir()))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});
}

INSTANTIATE_TEST_SUITE_P(Kinds, AtomicFileWriterDiskFull,
                         ::testing::Values(FullDiskKind::kTmpfs, FullDiskKind::kFileSizeLimit),
                         testing::kind_name);

}  // namespace
}  // namespace headroom
