// headroom <command> [options]: dispatch, and the one place errors become
// exit codes (0 ok, 1 internal, 2 usage/config/data, 3 out of memory,
// 4 numerical failure).
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "memory/postmortem.h"
#include "util/error.h"

namespace {

constexpr const char* kUsage = R"(usage: headroom <command> [options]

commands:
  train [exp.toml]   run an experiment on its backend (cpu, cuda); with no file,
                     the embedded quickstart experiment
  plan  [exp.toml]   run the same schedule on the meta backend: every allocation
                     of the real run, no math; prints the peak and whether it fits
  fit   [exp.toml] --vary KEY [--device PRESET | --capacity BYTES]
                     the largest value of KEY whose plan fits, by planning
  report <trace.h5 | run folder> [--json] [--html FILE] [--perfetto FILE]
                     summarize a trace: attributes, steps, peak bytes by category;
                     as JSON, a self-contained HTML page, a Perfetto trace
  report A B         compare two runs: config, peaks with deltas, first different event
  data <tool> ...    dataset tools
  export [exp.toml] --adapter DIR --merge --out DIR
                     fold a LoRA run's adapters into its base: a Hugging Face folder
  sweep exp.toml [--grid key=a,b ...] [--out DIR] [--submit]
                     write and plan every task of a sweep, then the Slurm job
                     array of those that fit; sweep status | collect DIR

`headroom <command> --help` describes each command's options.

exit codes: 0 ok, 1 internal error, 2 usage/config/data error,
            3 out of memory (postmortem written), 4 numerical failure,
            5 stopped on a signal (checkpoint written: resumable)
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return static_cast<int>(headroom::ExitCode::kUsage);
  }
  const std::string command = args.front();
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version") {
    std::printf("headroom %s\n", HEADROOM_VERSION);
    return 0;
  }
  try {
    if (command == "train") return headroom::train_command(args);
    if (command == "plan") return headroom::plan_command(args);
    if (command == "report") return headroom::report_command(args);
    if (command == "data") return headroom::data_command(args);
    if (command == "export") return headroom::export_command(args);
    if (command == "fit") return headroom::fit_command(args);
    if (command == "sweep") return headroom::sweep_command(args);
    std::fprintf(stderr, "headroom: unknown command \"%s\"\n\n%s", command.c_str(), kUsage);
    return static_cast<int>(headroom::ExitCode::kUsage);
  } catch (const headroom::OutOfMemory& oom) {
    // Reached only when a command did not handle the OOM itself (it should
    // have written the postmortem to its trace first).
    std::fprintf(stderr, "%s", headroom::format_postmortem(oom.postmortem()).c_str());
    return static_cast<int>(oom.code());
  } catch (const headroom::Error& e) {
    std::fprintf(stderr, "headroom %s: %s\n", command.c_str(), e.what());
    return static_cast<int>(e.code());
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the commands did not check up front (they name the key or
    // argument when they do): still the user's file system, not a bug.
    std::fprintf(stderr, "headroom %s: %s\n", command.c_str(), e.what());
    return static_cast<int>(headroom::ExitCode::kUsage);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headroom %s: internal error: %s\n", command.c_str(), e.what());
    return static_cast<int>(headroom::ExitCode::kInternal);
  }
}
