// Errors with context, and the process exit codes they map to.
//
// Every error a user can cause (config, data, command line, weights) is an
// Error whose message already names the file, key or position; the CLI prints
// what() and exits with exit_code(). Nothing below the CLI calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace headroom {

// Documented in README.md and docs/cli.md; scripts (Slurm sweeps) branch on them.
enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,     // a bug or an unexpected system failure
  kUsage = 2,        // bad command line, config, data or weights
  kOutOfMemory = 3,  // postmortem written
  kNumerical = 4,    // loss or gradients not finite beyond what skipping allows
  kStopped = 5,      // stopped on a signal, resumable: every step done is in a complete
                     // checkpoint; checkpoint.resume = "auto" continues (docs/cli.md)
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// The user gave something we cannot use; the message says what and where.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::kUsage, message) {}
};

class NumericalError : public Error {
 public:
  explicit NumericalError(const std::string& message) : Error(ExitCode::kNumerical, message) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(ExitCode::kInternal, message) {}
};

// Throws InternalError("<what>: <strerror(errno)>") — for failed system calls.
[[noreturn]] void throw_system_error(const std::string& what);

}  // namespace headroom

// An invariant of headroom itself (not of user input): failing it is a bug.
#define HR_CHECK(cond, msg)                                                                    \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::headroom::InternalError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                      ": check failed: " #cond ": " + (msg));                  \
  } while (0)
