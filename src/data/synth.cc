#include "data/synth.h"

#include <climits>
#include <cmath>
#include <filesystem>

#include "data/token_dataset.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

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
  if (documents < 1 || documents > kMaxSynthDocuments)
    throw UsageError("--documents " + std::to_string(documents) + ": expected 1.." +
                     std::to_string(kMaxSynthDocuments));
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

SynthSummary synth_markov_dataset(const SynthOptions& options) {
  check_synth_flags(options.spec, options.documents);
  prepare_output(options.out, options.overwrite);
  SynthSummary summary;
  summary.entropy_rate_nats = write_markov_corpus(options.out, options.spec, options.lengths,
                                                  options.documents, options.spec.seed);
  const TokenDataset written = TokenDataset::open(options.out, 0);
  summary.path = options.out;
  summary.documents = written.num_documents();
  summary.tokens = written.num_tokens();
  summary.vocab_size = options.spec.vocab_size;
  return summary;
}

}  // namespace headroom
