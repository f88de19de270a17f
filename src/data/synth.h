// `headroom data synth` as library code: a synthetic Markov corpus
// (data/markov.h) written to a dataset file, its entropy rate — the loss a
// perfect model reaches — stored as the source_entropy_nats attribute. The
// CLI (src/cli/data_synth.cc) parses the options and prints the summary.
#pragma once

#include <cstdint>
#include <string>

#include "data/markov.h"

namespace headroom {

// Past this a corpus is a disk-filling mistake, not an experiment: 100M
// documents of the default lengths are 27 billion tokens (100 GiB).
inline constexpr int64_t kMaxSynthDocuments = 100'000'000;

struct SynthOptions {
  std::string out;  // the dataset file to write
  MarkovSpec spec;  // the chain; spec.seed also seeds the documents
  int64_t documents = 1000;
  LengthSpec lengths = LengthSpec::uniform(32, 512);
  bool overwrite = false;  // replace an existing `out` (never a folder)
};

// What was written, read back from the file.
struct SynthSummary {
  std::string path;
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t vocab_size = 0;
  double entropy_rate_nats = 0.0;  // nats per token
};

// Checks the options, makes `out`'s folder when it is missing, writes the
// corpus (atomically, write_markov_corpus) and opens it again for the
// summary. Throws UsageError naming the option as `headroom data synth`
// spells it ("--vocab 0: expected 1..2147483647 (token ids are int32)",
// "OUT: exists; pass --overwrite to replace it") before anything is written.
SynthSummary synth_markov_dataset(const SynthOptions& options);

}  // namespace headroom
