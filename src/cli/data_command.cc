// `headroom data <tool>`: dispatch to the dataset tools, and the pieces they
// share (option parsing, the --lengths grammar).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <string_view>

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

// The longest synthetic document: 2^24 tokens (64 MiB, built in memory),
// far past any context a run trains on.
constexpr int64_t kMaxSynthLength = int64_t{1} << 24;

[[noreturn]] void bad_lengths(const std::string& text, const std::string& why) {
  throw UsageError("--lengths \"" + text + "\": " + why +
                   " (expected fixed:L, uniform:A-B, lognormal:MEDIAN,SIGMA,MIN-MAX or "
                   "histogram:A-B:W,C-D:W,...)");
}

template <typename T>
T number(std::string_view part, const std::string& text, const char* what) {
  T value{};
  const char* end = part.data() + part.size();
  auto [ptr, ec] = std::from_chars(part.data(), end, value);
  if (part.empty() || ec != std::errc() || ptr != end)
    bad_lengths(text, std::string(what) + " \"" + std::string(part) + "\" is not a number");
  return value;
}

// "A-B" as two lengths.
std::pair<int64_t, int64_t> range(std::string_view part, const std::string& text) {
  const size_t dash = part.find('-');
  if (dash == std::string_view::npos)
    bad_lengths(text, "\"" + std::string(part) + "\" is not a range A-B");
  return {number<int64_t>(part.substr(0, dash), text, "length"),
          number<int64_t>(part.substr(dash + 1), text, "length")};
}

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t at = s.find(by, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

}  // namespace

LengthSpec parse_length_spec(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) bad_lengths(text, "no kind before ':'");
  const std::string kind = text.substr(0, colon);
  const std::string_view rest = std::string_view(text).substr(colon + 1);
  LengthSpec spec;
  if (kind == "fixed") {
    spec = LengthSpec::fixed(number<int64_t>(rest, text, "length"));
  } else if (kind == "uniform") {
    auto [lo, hi] = range(rest, text);
    spec = LengthSpec::uniform(lo, hi);
  } else if (kind == "lognormal") {
    std::vector<std::string_view> parts = split(rest, ',');
    if (parts.size() != 3) bad_lengths(text, "lognormal takes MEDIAN,SIGMA,MIN-MAX");
    auto [lo, hi] = range(parts[2], text);
    spec = LengthSpec::lognormal(number<double>(parts[0], text, "median"),
                                 number<double>(parts[1], text, "sigma"), lo, hi);
  } else if (kind == "histogram") {
    std::vector<LengthSpec::Bucket> buckets;
    for (std::string_view bucket : split(rest, ',')) {
      std::vector<std::string_view> parts = split(bucket, ':');
      if (parts.size() != 2)
        bad_lengths(text, "histogram bucket \"" + std::string(bucket) + "\" is not A-B:W");
      auto [lo, hi] = range(parts[0], text);
      buckets.push_back({lo, hi, number<double>(parts[1], text, "weight")});
    }
    spec = LengthSpec::histogram(std::move(buckets));
  } else {
    bad_lengths(text, "unknown kind \"" + kind + "\"");
  }
  try {
    spec.validate();
  } catch (const UsageError& e) {
    bad_lengths(text, e.what());
  }
  int64_t longest = spec.kind == LengthSpec::Kind::kFixed ? spec.min_length : spec.max_length;
  if (spec.kind == LengthSpec::Kind::kHistogram) {
    longest = 0;
    for (const LengthSpec::Bucket& b : spec.buckets)
      longest = std::max(longest, b.max_length);
  }
  if (longest > kMaxSynthLength)
    bad_lengths(text, "a length of " + std::to_string(longest) + " tokens is past the " +
                          std::to_string(kMaxSynthLength) +
                          " a synthetic document may have (each is built in memory)");
  return spec;
}

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
