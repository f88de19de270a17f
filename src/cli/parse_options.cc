#include "parse_options.h"

#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

po::variables_map parse_command_line(const std::vector<std::string>& args,
                                     const po::options_description& visible,
                                     const po::options_description& hidden,
                                     const po::positional_options_description& positional,
                                     const std::string& command) {
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + " (see headroom " + command + " --help)");
  }
  return vm;
}

}  // namespace headroom
