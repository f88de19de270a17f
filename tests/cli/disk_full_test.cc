// A full disk under every command that writes: exit 2, a message naming the
// file and saying the disk is full, nothing written before the failure lost,
// and HDF5 closed cleanly (no crash, no error stack at exit). Each test runs
// on a small tmpfs (root, mount permitted) and under a file size limit
// (RLIMIT_FSIZE, EFBIG), whichever this machine allows. Also: symlink loops
// as `data convert` arguments, and util/atomic_file.h on a full disk.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "test_util/small_disk.h"
#include "test_util/small_run.h"
#include "trace/reader.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

using testing::FullDiskKind;
using testing::Result;
using testing::slurp;
using testing::SmallDisk;

// The quickstart shrunk to a fraction of a second per step (as cli_test.cc).
const std::string kSmall = testing::small_run_overrides(50);

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What a clean failure on a full disk looks like on stderr.
void expect_disk_full(const Result& r, const std::string& file) {
  EXPECT_EQ(r.code, 2) << r.err;  // -1: killed by a signal (the old SIGSEGV)
  EXPECT_TRUE(contains(r.err, file)) << r.err;
  EXPECT_TRUE(contains(r.err, "(disk full)")) << r.err;
  // HDF5's own error stack or its exit handler's complaints.
  EXPECT_FALSE(contains(r.err, "HDF5-DIAG")) << r.err;
  EXPECT_FALSE(contains(r.err, "infinite loop")) << r.err;
}

class DiskFull : public testing::ScratchFolder, public ::testing::WithParamInterface<FullDiskKind> {
 protected:
  // A disk of `bytes` at <scratch>/disk, or a skip when this machine has
  // no way to make one of this kind.
  bool make_disk(uint64_t bytes) {
    disk_.emplace(dir_ / "disk", bytes, GetParam());
    return disk_->why_not().empty();
  }
  Result run_on_disk(const std::string& args) { return run_headroom(args, disk_->shell_prefix()); }
  void TearDown() override {
    disk_.reset();  // unmount before the scratch folder goes
    ScratchFolder::TearDown();
  }
  // A JSONL of `documents` documents of 300 pseudo-random ids below 50000
  // (about 2 KB each; they compress little, so the tokens need ~1 KB each).
  void write_jsonl(const std::string& name, int documents) {
    std::ofstream out(dir_ / name);
    uint64_t state = 12345;
    for (int d = 0; d < documents; ++d) {
      out << "{\"input_ids\": [";
      for (int i = 0; i < 300; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        out << (i ? "," : "") << (state >> 33) % 50000;
      }
      out << "]}\n";
    }
  }
  std::vector<std::string> listing(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::optional<SmallDisk> disk_;
};

#define SKIP_WITHOUT_DISK(bytes) \
  if (!make_disk(bytes)) GTEST_SKIP() << name_of(GetParam()) << ": " << disk_->why_not()

// The trace fills the disk at its first flush (its first event chunk is
// 816 KiB): the reproduction, which crashed in H5_term_library.
TEST_P(DiskFull, TrainStopsWithAReadableTrace) {
  SKIP_WITHOUT_DISK(512 * 1024);
  const Result r = run_on_disk(
      "train --overwrite --set run.out_dir=disk --set run.steps=2 --set schedule.warmup_steps=0" +
      std::string(kSmall));
  expect_disk_full(r, "disk/quickstart/trace.rank0.h5");
  // The trace holds what was flushed (the header; no step fitted) and opens.
  bool found = false;
  for (const auto& entry : fs::directory_iterator(dir_ / "disk/quickstart")) {
    if (!entry.path().filename().string().starts_with("trace.rank0")) continue;
    found = true;
    const TraceReader trace = TraceReader::open(entry.path().string());
    EXPECT_EQ(trace.header().run_name, "quickstart");
    EXPECT_EQ(trace.num_steps(), 0u);
  }
  EXPECT_TRUE(found) << "no trace left in disk/quickstart";
}

// A previous dataset survives a failed `convert --overwrite` byte for byte,
// and no temporary is left beside it.
TEST_P(DiskFull, ConvertKeepsThePreviousDataset) {
  SKIP_WITHOUT_DISK(512 * 1024);
  write_jsonl("small.jsonl", 5);
  write_jsonl("big.jsonl", 3000);  // ~6 MB of JSONL, ~2 MB of tokens
  ASSERT_EQ(run_headroom("data convert small.jsonl disk/out.h5 --vocab 50000").code, 0);
  const std::string before = slurp(dir_ / "disk/out.h5");
  const Result r = run_on_disk("data convert big.jsonl disk/out.h5 --vocab 50000 --overwrite");
  expect_disk_full(r, "disk/out.h5");
  EXPECT_TRUE(slurp(dir_ / "disk/out.h5") == before) << "disk/out.h5 changed";
  EXPECT_EQ(listing(dir_ / "disk"), std::vector<std::string>{"out.h5"});
}

TEST_P(DiskFull, SynthKeepsThePreviousDataset) {
  SKIP_WITHOUT_DISK(512 * 1024);
  ASSERT_EQ(run_headroom("data synth disk/out.h5 --vocab 256 --documents 10").code, 0);
  const std::string before = slurp(dir_ / "disk/out.h5");
  const Result r = run_on_disk("data synth disk/out.h5 --vocab 256 --documents 20000 --overwrite");
  expect_disk_full(r, "disk/out.h5");
  EXPECT_TRUE(slurp(dir_ / "disk/out.h5") == before) << "disk/out.h5 changed";
  EXPECT_EQ(listing(dir_ / "disk"), std::vector<std::string>{"out.h5"});
}

// data.synthesize_if_missing: no corpus (nor a temporary) is left at
// data.path, so the next run synthesizes it again instead of trusting a stub.
TEST_P(DiskFull, CorpusSynthesisLeavesNoCorpus) {
  SKIP_WITHOUT_DISK(512 * 1024);
  const Result r = run_on_disk(
      "train --overwrite --set run.out_dir=runs --set run.steps=1 --set data.path=disk/c.h5"
      " --set data.synthetic_documents=20000 --set schedule.warmup_steps=0" +
      std::string(" --set batch.max_tokens_per_micro_batch=256 --set loss.chunk_size=128"));
  expect_disk_full(r, "disk/c.h5");
  EXPECT_TRUE(listing(dir_ / "disk").empty());
}

// 20 MB holds one step's weights (12 MB) but not its optimizer state (24 MB):
// the save fails halfway, and no step-1/ is left that a resume would take.
TEST_P(DiskFull, CheckpointIsCompleteOrAbsent) {
  SKIP_WITHOUT_DISK(20 * 1024 * 1024);
  const Result r = run_on_disk(
      "train --overwrite --set run.out_dir=runs --set run.steps=2 --set checkpoint.save_every=1"
      " --set checkpoint.dir=disk/ck" +
      std::string(kSmall));
  expect_disk_full(r, "disk/ck/step-1/optimizer.safetensors");
  EXPECT_FALSE(fs::exists(dir_ / "disk/ck/step-1")) << "a half-saved checkpoint was left";
}

INSTANTIATE_TEST_SUITE_P(Kinds, DiskFull,
                         ::testing::Values(FullDiskKind::kTmpfs, FullDiskKind::kFileSizeLimit),
                         testing::kind_name);

// ---- util/atomic_file.h ------------------------------------------------------

class AtomicFileDiskFull : public DiskFull {};

// In a forked child when the disk is a file size limit, so the limit stays
// out of this process; the child's exit code says what it saw.
TEST_P(AtomicFileDiskFull, LeavesTheOldFileAndNoTemporary) {
  SKIP_WITHOUT_DISK(64 * 1024);
  const std::string path = (dir_ / "disk/config.toml").string();
  write_file_atomically(path, "old contents\n");
  const std::string big(1 << 20, 'x');
  std::string message;
  if (GetParam() == FullDiskKind::kTmpfs) {
    try {
      write_file_atomically(path, big);
    } catch (const UsageError& e) {
      message = e.what();
    }
    EXPECT_EQ(message, path + ": cannot write: No space left on device (disk full)");
  } else {
    const pid_t child = ::fork();
    if (child == 0) {
      SmallDisk::limit_this_process(64 * 1024);
      try {
        write_file_atomically(path, big);
      } catch (const UsageError& e) {
        _exit(std::string(e.what()) == path + ": cannot write: File too large (disk full)" ? 0 : 3);
      }
      _exit(4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  EXPECT_EQ(slurp(path), "old contents\n");
  EXPECT_EQ(listing(dir_ / "disk"), std::vector<std::string>{"config.toml"});
}

INSTANTIATE_TEST_SUITE_P(Kinds, AtomicFileDiskFull,
                         ::testing::Values(FullDiskKind::kTmpfs, FullDiskKind::kFileSizeLimit),
                         testing::kind_name);

// ---- symlink loops -----------------------------------------------------------

class SymlinkLoop : public testing::ScratchFolder {};

// `ln -s loop loop` as each path argument of `data convert`: exit 2 naming
// the argument (std::filesystem's exceptions used to surface as exit 1), and
// an existing OUT untouched.
TEST_F(SymlinkLoop, ConvertArgumentsAreNamed) {
  fs::create_symlink("loop", dir_ / "loop");
  write("a.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  ASSERT_EQ(run_headroom("data convert a.jsonl out.h5 --vocab 10").code, 0);
  const std::string before = slurp(dir_ / "out.h5");
  const struct {
    std::string args;
    std::string expected;
  } cases[] = {
      {"loop out.h5 --vocab 10 --overwrite", "IN.jsonl loop: "},
      {"a.jsonl loop --vocab 10", "OUT.h5 loop: "},
      {"a.jsonl loop/out.h5 --vocab 10", "OUT.h5 loop/out.h5: "},
      {"a.jsonl out.h5 --vocab 10 --overwrite --text-field text --tokenizer loop",
       "--tokenizer loop: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = run_headroom("data convert " + c.args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, c.expected)) << r.err;
    EXPECT_TRUE(contains(r.err, "Too many levels of symbolic links")) << r.err;
    EXPECT_TRUE(slurp(dir_ / "out.h5") == before) << "out.h5 changed";
  }
}

}  // namespace
}  // namespace headroom
