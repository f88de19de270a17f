// `headroom data synth OUT.h5 --vocab N ...`: a synthetic Markov corpus
// (data/markov.h) whose entropy rate — the loss a perfect model reaches — is
// known and stored as the source_entropy_nats attribute.
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "data/length_spec.h"
#include "data/markov.h"
#include "data/token_dataset.h"
#include "data_tools.h"
#include "util/error.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace headroom {

namespace {

// Past this a corpus is a disk-filling mistake, not an experiment: 100M
// documents of the default lengths are 27 billion tokens (100 GiB).
constexpr int64_t kMaxDocuments = 100'000'000;

// The flags MarkovSource would also refuse, named as the user typed them.
void check_synth_flags(const MarkovSpec& spec, int64_t documents) {
  if (spec.vocab_size < 1 || spec.vocab_size > INT32_MAX)
    throw UsageError("--vocab " + std::to_string(spec.vocab_size) + ": expected 1.." +
                     std::to_string(INT32_MAX) + " (token ids are int32)");
  if (spec.order < 1)
    throw UsageError("--order " + std::to_string(spec.order) + ": must be at least 1");
  if (spec.branching < 1 || spec.branching > spec.vocab_size)
    throw UsageError("--branching " + std::to_string(spec.branching) + ": expected 1..--vocab (" +
                     std::to_string(spec.vocab_size) + ")");
  if (!std::isfinite(spec.concentration) || !(spec.concentration > 0.0))
    throw UsageError("--concentration " + std::to_string(spec.concentration) +
                     ": expected a finite number > 0");
  if (documents < 1 || documents > kMaxDocuments)
    throw UsageError("--documents " + std::to_string(documents) + ": expected 1.." +
                     std::to_string(kMaxDocuments));
}

// OUT must be a file path whose folder exists or can be made; an existing
// OUT is replaced only with --overwrite, and never when it is a folder.
void prepare_output(const std::string& out, bool overwrite) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(out, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError(out + ": " + ec.message() + " (OUT.h5)");
  if (fs::is_directory(fs::status(out, ec)))
    throw UsageError(out + ": is a folder; OUT.h5 names the dataset file to write");
  if (fs::exists(status) && !overwrite)
    throw UsageError(out + ": exists; pass --overwrite to replace it");
  const fs::path parent = fs::path(out).parent_path();
  if (parent.empty()) return;
  fs::create_directories(parent, ec);  // the seed experiments' results/data/ on a fresh checkout
  if (ec || !fs::is_directory(parent, ec))
    throw UsageError(out + ": cannot make its folder " + parent.string() + ": " +
                     (ec ? ec.message() : std::string("a file of that name exists")));
}

}  // namespace

int data_synth(const std::vector<std::string>& args) {
  std::string out;
  MarkovSpec spec;
  int64_t documents = 1000;
  std::string lengths_text = "uniform:32-512";
  bool overwrite = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "vocab", po::value<int64_t>(&spec.vocab_size)->required(),
      "vocabulary size V: every token id is in [0, V) (required)")(
      "order", po::value<int>(&spec.order)->default_value(1),
      "the chain's order k: the next token depends on the last k")(
      "branching", po::value<int>(&spec.branching)->default_value(8),
      "distinct successors per context (<= V)")(
      "concentration", po::value<double>(&spec.concentration)->default_value(1.0),
      "Dirichlet alpha of the successor weights; small = peaky, lower entropy")(
      "documents", po::value<int64_t>(&documents)->default_value(documents),
      "number of documents (at most 100,000,000)")(
      "lengths", po::value<std::string>(&lengths_text)->default_value(lengths_text),
      "document lengths: fixed:L, uniform:A-B, lognormal:MEDIAN,SIGMA,MIN-MAX or "
      "histogram:A-B:W,C-D:W,... (e.g. histogram:6000-8000:3,22000-26000:1)")(
      "seed", po::value<uint64_t>(&spec.seed)->default_value(1),
      "seed of the chain and of the documents")("overwrite", po::bool_switch(&overwrite),
                                                "replace an existing OUT.h5");
  po::options_description hidden;
  hidden.add_options()("out", po::value<std::string>(&out));
  po::positional_options_description positional;
  positional.add("out", 1);
  po::variables_map vm;
  if (!parse_data_options("synth",
                          "usage: headroom data synth OUT.h5 --vocab N [options]\n\n"
                          "Writes a corpus drawn from an order-k Markov chain with a known\n"
                          "entropy rate (stored as the source_entropy_nats attribute).\n",
                          args, visible, hidden, positional, vm))
    return 0;

  if (out.empty()) throw UsageError("missing OUT.h5 (see headroom data synth --help)");
  const LengthSpec lengths = parse_length_spec(lengths_text, "--lengths");
  check_synth_flags(spec, documents);
  prepare_output(out, overwrite);

  const double entropy = write_markov_corpus(out, spec, lengths, documents, spec.seed);
  const TokenDataset written = TokenDataset::open(out, 0);
  std::printf("wrote %s: %lld documents, %lld tokens, vocab %lld, entropy rate %.6f nats/token\n",
              out.c_str(), static_cast<long long>(written.num_documents()),
              static_cast<long long>(written.num_tokens()), static_cast<long long>(spec.vocab_size),
              entropy);
  return 0;
}

}  // namespace headroom
