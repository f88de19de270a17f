// The command line of one command, parsed with Boost.Program_options the
// same way everywhere: `visible` (shown by --help) and `hidden` options,
// `positional` names, and a Boost error turned into a UsageError (exit 2)
// that says where to look: "... (see headroom <command> --help)".
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace headroom {

boost::program_options::variables_map parse_command_line(
    const std::vector<std::string>& args,
    const boost::program_options::options_description& visible,
    const boost::program_options::options_description& hidden,
    const boost::program_options::positional_options_description& positional,
    const std::string& command);

}  // namespace headroom
