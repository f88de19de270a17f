// The `headroom` subcommands. Each takes the arguments after its name, prints
// its own output, and returns an exit code (see util/error.h); user errors are
// thrown as headroom::Error and mapped to exit codes by main().
#pragma once

#include <string>
#include <vector>

namespace headroom {

int train_command(const std::vector<std::string>& args);
int plan_command(const std::vector<std::string>& args);
int report_command(const std::vector<std::string>& args);
int data_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);
int fit_command(const std::vector<std::string>& args);
int sweep_command(const std::vector<std::string>& args);

}  // namespace headroom
