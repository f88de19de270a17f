// TraceWriter when the disk fills in the middle of a run: the failing flush
// throws UsageError naming the trace and saying the disk is full, the file
// keeps every step flushed before (TraceReader and h5py open it), later
// calls repeat the error, and closing touches the file no more. On a small
// tmpfs filled up by another file, or in a child under RLIMIT_FSIZE.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util/small_disk.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::FullDiskKind;
using testing::SmallDisk;

constexpr int kSteps = 3;
constexpr int kEventsPerStep = 1000;

void append(TraceWriter& writer, int step) {
  for (int e = 0; e < kEventsPerStep; ++e)
    writer.on_memory_event(testing::make_event(step * kEventsPerStep + e, step));
  writer.append_step(testing::make_step(step), {});
}

// Fills what is left of the disk under `folder`.
void fill(const std::filesystem::path& folder) {
  std::ofstream filler(folder / "filler", std::ios::binary);
  const std::string block(4096, 'f');
  while (filler.write(block.data(), block.size())) {
  }
}

// Writes kSteps steps and flushes each, takes the room away, then tries one
// more; returns what that flush threw ("" if nothing).
std::string fail_after_steps(const std::string& path, const std::filesystem::path& disk,
                             FullDiskKind kind) {
  const std::vector<std::string> tags = {"a", "b", "c"};
  TraceWriter writer(path, testing::sample_header(), true);
  for (int step = 0; step < kSteps; ++step) {
    append(writer, step);
    writer.flush(tags);
  }
  if (kind == FullDiskKind::kTmpfs)
    fill(disk);
  else
    SmallDisk::limit_this_process(std::filesystem::file_size(path) + 1024);
  append(writer, kSteps);
  std::string message;
  try {
    writer.flush(tags);
  } catch (const UsageError& e) {
    message = e.what();
  }
  // A second try repeats the error without touching the file.
  try {
    writer.flush(tags);
    message += " / second flush did not throw";
  } catch (const UsageError& e) {
    if (message != e.what()) message += " / second flush: " + std::string(e.what());
  }
  writer.close();  // nothing more to say: the failure closed the file
  return message;
}

class TraceDiskFull : public ::testing::TestWithParam<FullDiskKind> {};

TEST_P(TraceDiskFull, KeepsEveryFlushedStep) {
  testing::TempDir dir;
  SmallDisk disk(dir.file("disk"), 4 << 20, GetParam());
  if (!disk.why_not().empty()) GTEST_SKIP() << name_of(GetParam()) << ": " << disk.why_not();
  const std::string path = (disk.dir() / "trace.rank3.h5").string();
  const std::string expected = path + ": cannot write: ";
  if (GetParam() == FullDiskKind::kTmpfs) {
    const std::string message = fail_after_steps(path, disk.dir(), GetParam());
    EXPECT_EQ(message, expected + "No space left on device (disk full)");
  } else {
    // The limit must stay out of this process: a child writes, its exit
    // code says whether the message was right.
    const pid_t child = ::fork();
    if (child == 0) {
      const std::string message = fail_after_steps(path, disk.dir(), GetParam());
      _exit(message == expected + "File too large (disk full)" ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  const TraceReader trace = TraceReader::open(path);
  ASSERT_EQ(trace.num_steps(), static_cast<uint64_t>(kSteps));
  const std::vector<StepRecord> steps = trace.steps();
  for (int step = 0; step < kSteps; ++step)
    EXPECT_EQ(steps[step].step, step);
  EXPECT_EQ(trace.num_events(), static_cast<uint64_t>(kSteps * kEventsPerStep));
  EXPECT_EQ(trace.tags().size(), 3u);
  if (testing::have_h5py()) {
    const testing::CommandResult r =
        testing::run_command(std::string(testing::kPython) + " -c \"import h5py; f = h5py.File('" +
                             path + "', 'r'); print(f['steps'].shape[0])\"");
    EXPECT_EQ(r.output, std::to_string(kSteps) + "\n");
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, TraceDiskFull,
                         ::testing::Values(FullDiskKind::kTmpfs, FullDiskKind::kFileSizeLimit),
                         testing::kind_name);

}  // namespace
}  // namespace headroom
