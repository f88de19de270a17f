// The run folder under hostile use, by running the real binary: a failed
// command (late errors with --overwrite, bad resumes, bad paths) leaves the
// earlier run byte for byte as it was; two commands never write one folder
// at once; --overwrite replaces a whole run, checkpoints included; a run
// that is not finite ends with exit 4.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "cli_harness.h"
#include "data/token_dataset_writer.h"
#include "test_util/small_disk.h"
#include "test_util/small_run.h"
#include "test_util/source_tree.h"
#include "trace/reader.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

using testing::Result;
using testing::slurp;

// A quickstart run small enough for a fraction of a second (also under ASan).
const std::string kSmall = testing::small_run_overrides(50, 0) + " --set run.steps=2";

// Every file under `dir` with its bytes, so "nothing changed" is one
// comparison. The lock files are left out: they hold the pid of whoever
// took the lock last, a courtesy for the "in use" message.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name != ".train.lock" && name != ".plan.lock")
      files[fs::relative(entry.path(), dir).string()] = slurp(entry.path());
  }
  return files;
}

// The names of the files that differ, rather than gtest's diff of megabytes
// of HDF5.
std::string differences(const std::map<std::string, std::string>& a,
                        const std::map<std::string, std::string>& b) {
  std::string out;
  for (const auto& [name, bytes] : a)
    if (!b.count(name))
      out += " removed " + name + ";";
    else if (b.at(name) != bytes)
      out += " changed " + name + ";";
  for (const auto& [name, bytes] : b)
    if (!a.count(name)) out += " added " + name + ";";
  return out;
}

class RunFolderTest : public testing::ScratchFolder {
 protected:
  Result train(const std::string& args) {
    return run_headroom("train" + std::string(kSmall) + " " + args);
  }
  fs::path run_dir(const std::string& name = "quickstart") { return dir_ / "results" / name; }
  // The earlier run every failing command below must leave alone.
  std::map<std::string, std::string> finished_run() {
    const Result r = train("--set checkpoint.save_every=1");
    EXPECT_EQ(r.code, 0) << r.err;
    return snapshot(run_dir());
  }
};

TEST_F(RunFolderTest, LateErrorsWithOverwriteLeaveTheEarlierRunAsItWas) {
  const auto before = finished_run();
  ASSERT_TRUE(before.count("trace.rank0.h5"));
  ASSERT_TRUE(before.count("checkpoints/step-2/trainer_state.json"));
  write("file", "not a folder");
  struct Case {
    std::string args, names;
  };
  const Case cases[] = {
      {"--set batch.max_tokens_per_micro_batch=4294967296", "batch.max_tokens_per_micro_batch"},
      {"--set batch.mode=\\\"padded\\\" --set batch.micro_batch_size=65536 --set "
       "batch.seq_len=65536",
       "batch.seq_len"},
      {"--set checkpoint.save_every=1 --set checkpoint.dir=\\\"file\\\"", "checkpoint.dir"},
      {"--set loss.logits_dtype=\\\"bf16\\\"", "loss.logits_dtype"},
      {"--set optimizer.master_dtype=\\\"bf16\\\"", "optimizer.master_dtype"},
      {"--set data.synthesize_if_missing=false --set data.path=\\\"missing/none.h5\\\"",
       "data.path"},
      {"--set data.synthesize_if_missing=true --set data.path=\\\"new.h5\\\" "
       "--set data.synthetic_lengths=\\\"uniform:9-3\\\"",
       "data.synthetic_lengths"},
  };
  for (const Case& c : cases) {
    const Result r = train("--overwrite " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(differences(before, snapshot(run_dir())), "") << c.args;
  }
}

TEST_F(RunFolderTest, AnEmptyDatasetIsRefusedBeforeAnythingIsReplaced) {
  const auto before = finished_run();
  {
    TokenDatasetAttributes attributes;
    attributes.vocab_size = 512;
    TokenDatasetWriter writer((dir_ / "empty.h5").string(), attributes);
    writer.finish();
  }
  const Result r = train("--overwrite --set data.path=\\\"empty.h5\\\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("empty.h5"), std::string::npos) << r.err;
  EXPECT_EQ(differences(before, snapshot(run_dir())), "");
}

TEST_F(RunFolderTest, AFailedResumeWritesNothingAndAGoodOneThenRuns) {
  const auto before = finished_run();
  const fs::path step1 = run_dir() / "checkpoints" / "step-1";
  // A truncated optimizer file: found only once the optimizer exists.
  const fs::path optimizer = step1 / "optimizer.safetensors";
  const std::string bytes = slurp(optimizer);
  fs::path broken = dir_ / "broken";
  fs::copy(step1, broken);
  std::ofstream(broken / "optimizer.safetensors", std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() / 2);
  Result r = train("--set run.steps=3 --set checkpoint.resume_from=\\\"broken\\\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("checkpoint.resume_from"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("optimizer.safetensors"), std::string::npos) << r.err;
  EXPECT_EQ(differences(before, snapshot(run_dir())), "");

  // An fp32 checkpoint resumed as bf16 says so, not "no tensor embed.master".
  r = train("--set run.steps=3 --set model.dtype=\\\"bf16\\\" --set checkpoint.resume_from=\\\"" +
            step1.string() + "\\\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("model.dtype"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("F32"), std::string::npos) << r.err;
  EXPECT_EQ(differences(before, snapshot(run_dir())), "");

  // The retry with the good checkpoint is not refused by leftovers.
  r = train("--set run.steps=3 --set checkpoint.resume_from=\\\"" + step1.string() + "\\\"");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(run_dir() / "trace.rank0.from-step-1.h5"));
  EXPECT_TRUE(fs::exists(run_dir() / "config.from-step-1.toml"));
}

TEST_F(RunFolderTest, OverwriteReplacesTheWholeEarlierRun) {
  Result r = train("--set run.steps=4 --set checkpoint.save_every=1");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train(
      "--set run.steps=4 --set checkpoint.resume_from=\\\"results/quickstart/checkpoints/"
      "step-2\\\" --set checkpoint.save_every=0");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(run_dir() / "checkpoints" / "step-4"));
  ASSERT_TRUE(fs::exists(run_dir() / "trace.rank0.from-step-2.h5"));

  // Without --overwrite the earlier run is refused; with it, its later
  // checkpoints and its continuation are gone, so "the latest checkpoint"
  // is this run's.
  r = train("--set checkpoint.save_every=1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exists from an earlier run"), std::string::npos) << r.err;
  r = train("--overwrite --set checkpoint.save_every=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(run_dir() / "checkpoints" / "step-2"));
  EXPECT_FALSE(fs::exists(run_dir() / "checkpoints" / "step-3"));
  EXPECT_FALSE(fs::exists(run_dir() / "checkpoints" / "step-4"));
  EXPECT_FALSE(fs::exists(run_dir() / "trace.rank0.from-step-2.h5"));
  EXPECT_FALSE(fs::exists(run_dir() / "config.from-step-2.toml"));
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir()))
    EXPECT_EQ(entry.path().filename().string().find(".staging-"), std::string::npos)
        << entry.path();
  EXPECT_EQ(TraceReader::open((run_dir() / "trace.rank0.h5").string()).steps().size(), 2u);
}

TEST_F(RunFolderTest, ASecondRunOfTheSameNameIsRefusedWhileTheFirstLives) {
  // A first run long enough to be alive while the second starts; it is
  // killed afterwards, which must not block the next run.
  const std::string first = "cd '" + dir_.string() + "' && exec '" + testing::headroom_binary() +
                            "' train" + std::string(kSmall) +
                            " --set run.steps=100000 > first.out 2> first.err";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", first.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Alive once it prints its first step (the lock is taken before that).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (slurp(dir_ / "first.out").find("step 1/") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(slurp(dir_ / "first.out").find("step 1/"), std::string::npos)
      << slurp(dir_ / "first.err");

  for (const char* extra : {"", "--overwrite"}) {
    const Result r = train(extra);
    EXPECT_EQ(r.code, 2) << extra << r.err;
    EXPECT_NE(r.err.find("in use by another headroom train (pid"), std::string::npos) << r.err;
  }
  // A plan of the same name may run beside it: it writes other files.
  EXPECT_EQ(run_headroom("plan" + std::string(kSmall)).code, 0);

  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const Result r = train("--overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TraceReader::open((run_dir() / "trace.rank0.h5").string()).steps().size(), 2u);
}

TEST_F(RunFolderTest, PathsThatCannotBeUsedNameTheirKey) {
  // A run.name too long for a folder name.
  Result r = train("--set run.name=\\\"" + std::string(5000, 'n') + "\\\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("run.name"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 2000u);

  // A 5 MB data.path: named, not printed whole; a 50 MB config is refused
  // as a whole, naming the file and the cap.
  {
    std::ofstream toml(dir_ / "long.toml");
    toml << "[data]\npath = \"" << std::string(5 << 20, 'p') << "\"\n";
  }
  r = run_headroom("train long.toml");
  EXPECT_EQ(r.code, 2) << r.err.substr(0, 500);
  EXPECT_NE(r.err.find("data.path"), std::string::npos) << r.err.substr(0, 500);
  EXPECT_LT(r.err.size(), 2000u);
  {
    std::ofstream toml(dir_ / "huge.toml");
    toml << "[data]\npath = \"" << std::string(50 << 20, 'p') << "\"\n";
  }
  r = run_headroom("train huge.toml");
  EXPECT_EQ(r.code, 2) << r.err.substr(0, 500);
  EXPECT_NE(r.err.find("huge.toml"), std::string::npos) << r.err.substr(0, 500);
  EXPECT_LT(r.err.size(), 2000u);

  // Symlink loops as data.path and as run.out_dir.
  fs::create_symlink("loop", dir_ / "loop");
  r = train("--set data.path=\\\"loop\\\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("data.path"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("symlink loop"), std::string::npos) << r.err;
  r = train("--set run.out_dir=\\\"loop\\\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("run.out_dir"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("symlink loop"), std::string::npos) << r.err;

  r = run_headroom("plan --world-size 100000");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--world-size 100000"), std::string::npos) << r.err;
}

TEST_F(RunFolderTest, RunsThatAreNotFiniteExitFour) {
  // lr = 1e30: the first step is finite, every later one is not.
  Result r = train(
      "--set run.steps=20 --set optimizer.lr=1e30 --set optimizer.grad_clip=0.0 "
      "--set optimizer.max_nonfinite_steps=3 --set checkpoint.save_every=2");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("optimizer.max_nonfinite_steps = 3"), std::string::npos) << r.err;
  // The steps that led there are kept: the finite one and the three skipped.
  const TraceReader trace = TraceReader::open((run_dir() / "trace.rank0.h5").string());
  ASSERT_EQ(trace.steps().size(), 4u);
  EXPECT_FALSE(trace.steps()[0].skipped);
  EXPECT_TRUE(trace.steps()[3].skipped);

  // Starting from those non-finite weights, no step is finite: exit 4 even
  // when stopping early is off.
  r = train(
      "--set run.name=\\\"nan\\\" --set optimizer.max_nonfinite_steps=0 "
      "--set model.weights=\\\"results/quickstart/checkpoints/step-2/model.safetensors\\\"");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("none of the 2 steps"), std::string::npos) << r.err;
}

// A plan of 10^6 steps would write ~100 GB of trace: it stops once the
// trace's growth shows it cannot fit the disk, keeping what it wrote.
TEST_F(RunFolderTest, APlanWhoseTraceCannotFitTheDiskStopsEarly) {
  testing::SmallDisk disk(dir_ / "disk", 48u << 20, testing::FullDiskKind::kTmpfs);
  if (!disk.why_not().empty()) GTEST_SKIP() << disk.why_not();
  const Result r = run_headroom("plan" + std::string(kSmall) +
                                " --set run.steps=1000000 --set run.out_dir=\"disk\"");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("steps left would need"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run.steps"), std::string::npos) << r.err;
  const TraceReader trace =
      TraceReader::open((dir_ / "disk" / "quickstart" / "plan.rank0.h5").string());
  EXPECT_GT(trace.steps().size(), 10u);
  EXPECT_LT(trace.steps().size(), 100000u);
}

TEST_F(RunFolderTest, PlansPrintTrainableParametersAndNoLoss) {
  // PEFT's print_trainable_parameters() for LoRA r=8 on q,v of llama-2-7b.
  const Result r = run_headroom(
      "plan --set model.preset=\\\"llama-2-7b\\\" --set model.dtype=\\\"bf16\\\" "
      "--set lora.enabled=true --set lora.rank=8 --set run.steps=1 --set schedule.warmup_steps=0 "
      "--set data.synthetic_documents=4 --set data.synthetic_lengths=\\\"fixed:64\\\" "
      "--set data.path=\\\"llama.h5\\\" --set batch.max_tokens_per_micro_batch=64 "
      "--set memory.device_capacity=0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("trainable params: 4,194,304 || all params: 6,742,609,920 || "
                       "trainable%: 0.0622"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("loss nan"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace headroom
