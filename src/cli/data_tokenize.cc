// `headroom data tokenize --tokenizer T [FILE|-] [--json] [--decode]`: the
// ids of a text under a HuggingFace byte-level BPE tokenizer.json
// (tokenizer/bpe_tokenizer.h), exactly as HF's encode(text, add_special_tokens=
// False) gives them; with --decode, the text of a list of ids.
//
// The whole input is read, then tokenized at once: splitting it (by lines,
// say) would change the ids where a pre-token spans the cut ("\n\n").
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "data/token_id_list.h"
#include "data_tools.h"
#include "tokenizer/bpe_tokenizer.h"
#include "util/error.h"
#include "util/read_file.h"

namespace po = boost::program_options;

namespace headroom {

namespace {

constexpr const char* kUsage =
    R"(usage: headroom data tokenize --tokenizer T [FILE|-] [--json] [--decode] [--stats]

Prints the token ids of FILE (standard input with no FILE or "-"), UTF-8
text, as HuggingFace's tokenizer gives them for encode(text,
add_special_tokens=False): special and added tokens written in the text
(<|im_start|>, <think>) become their own ids. T is a tokenizer.json or a
folder holding one (Qwen2/Qwen3, Llama-3, GPT-2 style byte-level BPE).
With --decode, FILE holds ids (separated by white space or commas, or a
JSON array) and their text is printed.

FILE must be a regular file (or standard input) of at most 1 GiB: it is
tokenized at once; convert a corpus with `headroom data convert`, which
streams.
)";

// A text given to `data tokenize` is tokenized at once (corpora go through
// `data convert`, which streams), and encode() takes at most 2 GiB.
constexpr uint64_t kMaxTokenizeTextBytes = uint64_t{1} << 30;

std::string read_input(const std::string& file) {
  if (file.empty() || file == "-")
    return read_stream(stdin, "<stdin>", kMaxTokenizeTextBytes, "text to tokenize");
  return read_regular_file(file, kMaxTokenizeTextBytes, "text to tokenize");
}

}  // namespace

int data_tokenize(const std::vector<std::string>& args) {
  std::string tokenizer_path, file;
  bool json = false, decode = false, stats = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "tokenizer", po::value<std::string>(&tokenizer_path)->required(),
      "tokenizer.json, or a folder holding one (required)")("json", po::bool_switch(&json),
                                                            "print the ids as one JSON array")(
      "decode", po::bool_switch(&decode), "read ids, print their text")(
      "stats", po::bool_switch(&stats),
      "print bytes, tokens and throughput (one thread) to standard error");
  po::options_description hidden;
  hidden.add_options()("file", po::value<std::string>(&file));
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_data_options("tokenize", kUsage, args, visible, hidden, positional, vm)) return 0;
  if (decode && json) throw UsageError("--json applies to ids, not to --decode's text output");

  using Clock = std::chrono::steady_clock;
  const Clock::time_point load_start = Clock::now();
  const BpeTokenizer tokenizer = BpeTokenizer::load(tokenizer_path);
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  const std::string input = read_input(file);
  const std::string where = file.empty() || file == "-" ? std::string("<stdin>") : file;

  if (decode) {
    const std::string text = tokenizer.decode(parse_token_id_list(input, where));
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }

  const Clock::time_point start = Clock::now();
  std::vector<int32_t> ids;
  try {
    ids = tokenizer.encode(input);
  } catch (const UsageError& e) {
    throw UsageError(where + ": " + e.what());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (json) {
    std::cout << nlohmann::json(ids).dump() << "\n";
  } else {
    std::string line;
    line.reserve(ids.size() * 7);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  if (stats)
    std::fprintf(
        stderr,
        "%s: %zu bytes, %zu tokens (%.2f bytes/token); tokenizer loaded in %.2f s; "
        "encoded in %.3f s: %.2f MB/s, %.0f tokens/s (one thread)\n",
        where.c_str(), input.size(), ids.size(),
        ids.empty() ? 0.0 : static_cast<double>(input.size()) / static_cast<double>(ids.size()),
        load_s, seconds, static_cast<double>(input.size()) / 1e6 / seconds,
        static_cast<double>(ids.size()) / seconds);
  return 0;
}

}  // namespace headroom
