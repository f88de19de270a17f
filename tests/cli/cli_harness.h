// What the command-line tests share: a scratch folder per test, and running
// the real `headroom` binary in it as a user would (a shell command line),
// with its exit code, standard output and standard error.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util/source_tree.h"

namespace headroom::testing {

struct Result {
  int code = -1;  // the exit status; -1 when the command did not exit (a signal)
  std::string out;
  std::string err;
  double seconds = 0;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fixture whose tests each get an empty folder, named after the test with
// a unique suffix (mkdtemp: two checkouts running the suite at once never
// share one) and removed afterwards, in which they run `headroom`.
class ScratchFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string pattern =
        (std::filesystem::temp_directory_path() /
         (std::string("headroom_") + test->test_suite_name() + "_" + test->name() + "_XXXXXX"))
            .string();
    // Parameterized names hold '/', which a folder name cannot.
    for (size_t i = std::filesystem::temp_directory_path().string().size() + 1; i < pattern.size();
         ++i)
      if (pattern[i] == '/') pattern[i] = '_';
    if (mkdtemp(pattern.data()) == nullptr) FAIL() << "mkdtemp " << pattern << " failed";
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `<prefix>headroom <args>` in the folder through the shell; `prefix`
  // goes before the binary (environment settings, a launcher such as
  // mpirun), `args` may end in redirections of standard input.
  Result run_headroom(const std::string& args, const std::string& prefix = "") {
    const std::string command = "cd '" + dir_.string() + "' && " + prefix + "'" +
                                headroom_binary() + "' " + args + " > out.txt 2> err.txt";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(command.c_str());
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "out.txt");
    r.err = slurp(dir_ / "err.txt");
    return r;
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  std::filesystem::path dir_;
};

}  // namespace headroom::testing
