// What every fuzz target shares: the input as a file (most readers take a
// path, as a user's file would be), and the one kind of exception a reader
// may throw for bad input.
//
// Each target is one file defining LLVMFuzzerTestOneInput. libFuzzer links
// it as is (the `fuzz` preset); the replay test (replay_test.cc) compiles the
// same file with -DLLVMFuzzerTestOneInput=fuzz_<target> under the ordinary
// build and feeds it every committed corpus and regression input.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/error.h"

namespace headroom::fuzz {

// A folder of this process's own (TMPDIR or /tmp), removed at exit: a reader
// sees a real file, as it would in a run, and parallel fuzzers never share one.
//
// The path is never destroyed: a static path object's destructor is
// registered after the atexit handler (when its initialisation completes), so
// it would run first and leave the handler a destroyed path, and every
// process would leave its folder behind (it did: one per replay test).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path* const dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/headroom-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return new std::filesystem::path(pattern);
  }();
  return *dir;
}

// Writes `bytes` to scratch_dir()/name (replacing it) and returns its path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = scratch_dir() / name;
  std::filesystem::create_directories(path.parent_path());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return path.string();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `read` on one input. A UsageError is the documented answer to bad
// input (util/error.h: the message names the file, key or position); anything
// else escapes: an InternalError (a failed HR_CHECK), another std::exception
// or a crash is a finding.
template <class Read>
int swallow_usage_errors(Read&& read) {
  try {
    read();
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace headroom::fuzz
