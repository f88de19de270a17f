// Replays every committed fuzz input under the ordinary build: each target's
// corpus/<target>/ seeds and regressions/<target>/ findings (the inputs that
// once crashed it, each fixed in src/). A target returns 0 or throws only a
// UsageError it swallows itself, so any exception or crash here is a
// regression. The target files are compiled with LLVMFuzzerTestOneInput
// renamed fuzz_<target> (CMakeLists.txt).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_util/temp_dir.h"

#define HEADROOM_FUZZ_TARGET_LIST(X) \
  X(config)                          \
  X(sweep)                           \
  X(token_dataset)                   \
  X(trace)                           \
  X(safetensors)                     \
  X(safetensors_index)               \
  X(model_config) X(tokenizer_json) X(tokenizer_encode) X(jsonl) X(train_state) X(shard_index)

#define HEADROOM_DECLARE_TARGET(name) extern "C" int fuzz_##name(const uint8_t*, size_t);
HEADROOM_FUZZ_TARGET_LIST(HEADROOM_DECLARE_TARGET)

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(HEADROOM_FUZZ_DIR) / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// scripts/fuzz.sh's -rss_limit_mb: an input that makes a reader ask for
// gigabytes is a finding there, so replaying it must fail here too.
constexpr long kRssLimitKiB = 2048L << 10;

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void replay(const std::string& target, int (*run)(const uint8_t*, size_t)) {
  const std::vector<fs::path> files = inputs_of(target);
  EXPECT_FALSE(files.empty()) << "no corpus for fuzz target " << target;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ASSERT_LT(peak_rss_kib(), kRssLimitKiB) << "peak RSS after this input, in KiB";
  }
}

#define HEADROOM_REPLAY_TEST(name) \
  TEST(FuzzReplay, name) {         \
    replay(#name, fuzz_##name);    \
  }
HEADROOM_FUZZ_TARGET_LIST(HEADROOM_REPLAY_TEST)

// A target writes its input under scratch_dir() (fuzz_input.h); a process
// that exits must take that folder with it, or every replay and every fuzzer
// leaves one in /tmp. Runs this binary again, one replay in a TMPDIR of its
// own, and looks in that folder afterwards.
TEST(FuzzScratch, FolderIsRemovedWhenTheProcessExits) {
  const headroom::testing::TempDir tmpdir;
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string command = "TMPDIR='" + tmpdir.path() + "' '" + self +
                              "' --gtest_filter=FuzzReplay.jsonl > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_TRUE(tmpdir.listing().empty()) << "left behind: " << tmpdir.listing().front();
}

}  // namespace
