// `headroom data <tool>`: the dataset tools, one file each (data_synth.cc,
// data_inspect.cc, data_batches.cc, data_convert.cc, data_tokenize.cc), dispatched by
// data_command.cc. Each parses its options, calls the library code of src/data (synth.h,
// inspect.h, batches.h, convert.h, token_id_list.h) or src/tokenizer, and prints. Each takes
// the arguments after its name, returns an exit code, and throws UsageError naming the
// option or file it could not use.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace headroom {

int data_synth(const std::vector<std::string>& args);
int data_inspect(const std::vector<std::string>& args);
int data_batches(const std::vector<std::string>& args);
int data_convert(const std::vector<std::string>& args);
int data_tokenize(const std::vector<std::string>& args);

// Parses `args` of `headroom data <tool>` into `vm`. Returns false after
// printing `usage` and the visible options for --help. A Boost error becomes
// a UsageError that names the option and points at --help.
bool parse_data_options(const std::string& tool, const std::string& usage,
                        const std::vector<std::string>& args,
                        const boost::program_options::options_description& visible,
                        const boost::program_options::options_description& hidden,
                        const boost::program_options::positional_options_description& positional,
                        boost::program_options::variables_map& vm);

}  // namespace headroom
