// `headroom data <tool>`: dispatch to the dataset tools, and the pieces they
// share (option parsing; the --lengths grammar is data/length_spec.h).
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "data_tools.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

namespace {

constexpr const char* kDataUsage = R"(usage: headroom data <tool> [options]

tools:
  synth OUT.h5 --vocab N ...   write a synthetic Markov corpus with a known entropy rate
  inspect FILE.h5 [--json]     documents, tokens, length percentiles and histogram,
                               vocab usage, loss-mask coverage, attributes
  convert IN.jsonl OUT.h5      token-id lists (or text, with --tokenizer) into a dataset
  tokenize --tokenizer T.json  byte-level BPE ids of text, as HuggingFace's tokenizer gives
  batches [EXP.toml] [--json]  the micro-batches an experiment's first steps train on

`headroom data <tool> --help` describes each tool's options (docs/cli.md).
)";

}  // namespace

bool parse_data_options(const std::string& tool, const std::string& usage,
                        const std::vector<std::string>& args,
                        const po::options_description& visible,
                        const po::options_description& hidden,
                        const po::positional_options_description& positional,
                        po::variables_map& vm) {
  po::options_description all;
  all.add(visible).add(hidden);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n" << visible << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + " (see headroom data " + tool + " --help)");
  }
  return true;
}

int data_command(const std::vector<std::string>& args) {
  if (args.empty())
    throw UsageError("missing <tool> (synth, convert, tokenize, inspect or batches; see --help)");
  const std::string& tool = args[0];
  if (tool == "--help" || tool == "-h" || tool == "help") {
    std::fputs(kDataUsage, stdout);
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (tool == "synth") return data_synth(rest);
  if (tool == "inspect") return data_inspect(rest);
  if (tool == "batches") return data_batches(rest);
  if (tool == "convert") return data_convert(rest);
  if (tool == "tokenize") return data_tokenize(rest);
  throw UsageError("unknown tool \"" + tool +
                   "\" (synth, convert, tokenize, inspect or batches; see --help)");
}

}  // namespace headroom
