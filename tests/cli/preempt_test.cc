// Preemption end to end on the real binary: a signal mid-run (SIGUSR2 as
// Slurm sends it ahead of the time limit, SIGTERM, SIGINT) ends `train` with
// exit 5 and a complete checkpoint; the same command with
// checkpoint.resume = "auto" continues from it and its losses are the
// uninterrupted run's, bit for bit. A storm of signals during the save, a
// signal before the first step, a partial checkpoint folder and one written
// with another config are each handled.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_harness.h"
#include "test_util/small_run.h"
#include "test_util/source_tree.h"
#include "trace/reader.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

// The quickstart shrunk as in cli_test.cc, with enough steps that a signal
// sent after the third lands mid-run.
const std::string kSmall = testing::small_run_overrides(50);
constexpr int kSteps = 12;

using testing::Result;
using testing::slurp;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;)
    words.push_back(word);
  return words;
}

class Preempt : public testing::ScratchFolder {
 protected:
  std::string args(const std::string& name, const std::string& extra = "") {
    return "train" + std::string(kSmall) + " --set run.steps=" + std::to_string(kSteps) +
           " --set run.name=" + name + " " + extra;
  }

  // Starts `headroom <args>` in the scratch folder without waiting for it:
  // its pid (the binary itself, so a signal reaches it and no shell).
  pid_t start(const std::string& command_args) {
    const std::vector<std::string> words = split(command_args);
    // The last command's output must not be mistaken for this one's.
    fs::remove(dir_ / "out.txt");
    fs::remove(dir_ / "err.txt");
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::chdir(dir_.c_str()) != 0) ::_exit(127);
      const int out = ::open("out.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open("err.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0 || err < 0) ::_exit(127);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      std::vector<char*> argv;
      std::string binary = testing::headroom_binary();
      argv.push_back(binary.data());
      std::vector<std::string> copy = words;
      for (std::string& word : copy)
        argv.push_back(word.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Runs `headroom <args>` to its end (no shell: `args` is split at spaces
  // and passed as it is, quotes included).
  Result run(const std::string& command_args) {
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = start(command_args);
    Result r;
    r.code = finish(pid);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.out = slurp(dir_ / "out.txt");
    r.err = slurp(dir_ / "err.txt");
    return r;
  }

  // Waits (up to a minute) until the started run's stdout holds `text`.
  bool wait_for_output(pid_t pid, const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (slurp(dir_ / "out.txt").find(text) != std::string::npos) return true;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited_ = status;
        return slurp(dir_ / "out.txt").find(text) != std::string::npos;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  // The exit code of the started run (-1: killed by a signal).
  int finish(pid_t pid) {
    int status = exited_;
    if (status < 0 && ::waitpid(pid, &status, 0) != pid) return -2;
    exited_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::vector<StepRecord> steps(const fs::path& trace) {
    return TraceReader::open(trace.string()).steps();
  }

  // The per-step numbers of `run` put together from its first trace and
  // the continuation from `step`.
  std::vector<StepRecord> stitched(const std::string& run, int64_t step) {
    const fs::path run_dir = dir_ / "results" / run;
    std::vector<StepRecord> all = steps(run_dir / "trace.rank0.h5");
    all.resize(static_cast<size_t>(step));
    for (const StepRecord& r :
         steps(run_dir / ("trace.rank0.from-step-" + std::to_string(step) + ".h5")))
      all.push_back(r);
    return all;
  }

  void expect_same_numbers(const std::vector<StepRecord>& got,
                           const std::vector<StepRecord>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].step, want[i].step);
      EXPECT_EQ(got[i].loss, want[i].loss) << "step " << i;
      EXPECT_EQ(got[i].grad_norm, want[i].grad_norm) << "step " << i;
      EXPECT_EQ(got[i].lr, want[i].lr) << "step " << i;
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "step " << i;
    }
  }

  // The reference: the same run, never interrupted.
  std::vector<StepRecord> uninterrupted() {
    const Result r = run(args("straight"));
    EXPECT_EQ(r.code, 0) << r.err;
    return steps(dir_ / "results/straight/trace.rank0.h5");
  }

  // The step a stopped run's output says it stopped after.
  static int64_t stopped_after(const std::string& out) {
    const size_t at = out.find(" after step ");
    if (at == std::string::npos) return -1;
    return std::atoll(out.c_str() + at + 12);
  }

  int exited_ = -1;  // a status wait_for_output already collected
};

class PreemptBySignal : public Preempt, public ::testing::WithParamInterface<int> {};

TEST_P(PreemptBySignal, StopsWithACheckpointAndAutoResumeContinuesBitForBit) {
  const int signal = GetParam();
  const std::vector<StepRecord> want = uninterrupted();
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));

  const std::string command = args("cut", "--set checkpoint.resume=\"auto\"");
  const pid_t pid = start(command);
  ASSERT_TRUE(wait_for_output(pid, "step 3/")) << slurp(dir_ / "err.txt");
  ::kill(pid, signal);
  ASSERT_EQ(finish(pid), 5) << slurp(dir_ / "out.txt") << slurp(dir_ / "err.txt");
  const std::string out = slurp(dir_ / "out.txt");
  EXPECT_NE(out.find(std::string("stopped on SIG") + sigabbrev_np(signal)), std::string::npos)
      << out;
  const int64_t k = stopped_after(out);
  ASSERT_GE(k, 3) << out;
  ASSERT_LT(k, kSteps) << out;

  // The checkpoint is complete, and the trace is closed and holds every step.
  const fs::path run_dir = dir_ / "results/cut";
  const fs::path checkpoint = run_dir / "checkpoints" / ("step-" + std::to_string(k));
  for (const char* file : {"model.safetensors", "config.json", "optimizer.safetensors",
                           "run_config.toml", "trainer_state.json"})
    EXPECT_TRUE(fs::exists(checkpoint / file)) << file;
  EXPECT_NE(slurp(checkpoint / "trainer_state.json").find("\"step\": " + std::to_string(k)),
            std::string::npos);
  EXPECT_EQ(steps(run_dir / "trace.rank0.h5").size(), static_cast<size_t>(k));

  // The same command again: it finds the checkpoint and finishes.
  const Result resumed = run(command);
  ASSERT_EQ(resumed.code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("continuing from " + checkpoint.lexically_relative(dir_).string()),
            std::string::npos)
      << resumed.out;
  expect_same_numbers(stitched("cut", k), want);
  // resume = "auto" checkpoints the last step: a third try has nothing to do.
  const Result again = run(command);
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.err.find("this run is complete"), std::string::npos) << again.err;
}

INSTANTIATE_TEST_SUITE_P(Signals, PreemptBySignal, ::testing::Values(SIGUSR2, SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(sigabbrev_np(p.param));
                         });

TEST_F(Preempt, SignalsDuringTheSaveLeaveALoadableCheckpoint) {
  const std::vector<StepRecord> want = uninterrupted();
  const std::string command = args("storm", "--set checkpoint.resume=\"auto\"");
  const pid_t pid = start(command);
  ASSERT_TRUE(wait_for_output(pid, "step 3/")) << slurp(dir_ / "err.txt");
  // One signal to stop, then one every millisecond until the process is
  // gone: many land while the checkpoint is written.
  int sent = 0, status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, sent % 2 ? SIGTERM : SIGUSR2);
    ++sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal";
  ASSERT_EQ(WEXITSTATUS(status), 5) << slurp(dir_ / "err.txt");
  EXPECT_GT(sent, 5);
  const int64_t k = stopped_after(slurp(dir_ / "out.txt"));
  ASSERT_GE(k, 3);
  const Result resumed = run(command);
  ASSERT_EQ(resumed.code, 0) << resumed.out << resumed.err;
  expect_same_numbers(stitched("storm", k), want);
}

TEST_F(Preempt, ASignalBeforeTheFirstStepLeavesTheFolderAsItWas) {
  // A larger corpus, so that its synthesis is still going when the signal
  // comes (the line saying so is printed after the handlers are in place).
  const std::string command =
      args("early", "--set checkpoint.resume=\"auto\" --set data.synthetic_documents=20000");
  const pid_t pid = start(command);
  ASSERT_TRUE(wait_for_output(pid, "writing a synthetic Markov corpus"));
  ::kill(pid, SIGUSR2);
  ASSERT_EQ(finish(pid), 5) << slurp(dir_ / "err.txt");
  const std::string out = slurp(dir_ / "out.txt");
  EXPECT_NE(out.find("stopped on SIGUSR2 before the first step"), std::string::npos) << out;
  // The run folder holds no trace, config or checkpoint: only the lock and
  // the (empty) checkpoint folder checked for writing.
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_ / "results/early"))
    EXPECT_TRUE(entry.path().filename() == ".train.lock" ||
                (entry.path().filename() == "checkpoints" && fs::is_empty(entry.path())))
        << entry.path();
  // The corpus it was writing is whole: the next try uses it.
  const Result again = run(command + " --set run.steps=2");
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("no complete checkpoint of this config, starting afresh"),
            std::string::npos)
      << again.out;
  EXPECT_EQ(again.out.find("writing a synthetic Markov corpus"), std::string::npos) << again.out;
}

TEST_F(Preempt, AutoPassesOverPartialCheckpointsAndThoseOfAnotherConfig) {
  const std::string command =
      "train" + std::string(kSmall) +
      " --set run.steps=6 --set checkpoint.save_every=2 --set checkpoint.resume=\"auto\"";
  Result first = run(command);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("starting afresh"), std::string::npos) << first.out;
  const fs::path run_dir = dir_ / "results/quickstart";
  const fs::path checkpoints = run_dir / "checkpoints";
  const std::vector<StepRecord> want = steps(run_dir / "trace.rank0.h5");
  // step-6 as a save that was killed before its marker; step-4 as if
  // another config had written it.
  fs::remove(checkpoints / "step-6" / "trainer_state.json");
  std::ofstream(checkpoints / "step-4" / "run_config.toml", std::ios::app) << "# edited\n";
  Result resumed = run(command);
  ASSERT_EQ(resumed.code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("step-6: incomplete"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("step-4: written with another config"), std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("continuing from results/quickstart/checkpoints/step-2"),
            std::string::npos)
      << resumed.out;
  expect_same_numbers(stitched("quickstart", 2), want);
  // The continuation rewrote step-6 whole.
  EXPECT_TRUE(fs::exists(checkpoints / "step-6" / "trainer_state.json"));

  // Another config in the same folder is another run: auto does not take
  // its checkpoints, and starting afresh over it needs --overwrite.
  Result other = run(command + " --set optimizer.lr=0.001");
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.err.find("with another config"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("--overwrite"), std::string::npos) << other.err;
  other = run(command + " --set optimizer.lr=0.001 --overwrite");
  EXPECT_EQ(other.code, 0) << other.err;
  EXPECT_NE(other.out.find("starting afresh"), std::string::npos) << other.out;
  EXPECT_FALSE(fs::exists(run_dir / "trace.rank0.from-step-2.h5")) << "the earlier run is gone";
}

TEST_F(Preempt, AutoAndResumeFromExcludeEachOther) {
  const Result r = run("train --set checkpoint.resume=\"auto\" --set checkpoint.resume_from=x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("checkpoint.resume: \"auto\" picks the checkpoint itself"),
            std::string::npos)
      << r.err;
  const Result bad = run("train --set checkpoint.resume=\"sometimes\"");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("expected \"never\" or \"auto\""), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace headroom
