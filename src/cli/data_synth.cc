// `headroom data synth OUT.h5 --vocab N ...`: the options of
// synth_markov_dataset() (data/synth.h), which writes a synthetic Markov
// corpus of known entropy rate; this file parses and prints.
#include <cstdio>

#include "data/length_spec.h"
#include "data/synth.h"
#include "data_tools.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

int data_synth(const std::vector<std::string>& args) {
  SynthOptions o;
  MarkovSpec& spec = o.spec;
  std::string lengths_text = "uniform:32-512";
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
      "documents", po::value<int64_t>(&o.documents)->default_value(o.documents),
      "number of documents (at most 100,000,000)")(
      "lengths", po::value<std::string>(&lengths_text)->default_value(lengths_text),
      "document lengths: fixed:L, uniform:A-B, lognormal:MEDIAN,SIGMA,MIN-MAX or "
      "histogram:A-B:W,C-D:W,... (e.g. histogram:6000-8000:3,22000-26000:1)")(
      "seed", po::value<uint64_t>(&spec.seed)->default_value(1),
      "seed of the chain and of the documents")("overwrite", po::bool_switch(&o.overwrite),
                                                "replace an existing OUT.h5");
  po::options_description hidden;
  hidden.add_options()("out", po::value<std::string>(&o.out));
  po::positional_options_description positional;
  positional.add("out", 1);
  po::variables_map vm;
  if (!parse_data_options("synth",
                          "usage: headroom data synth OUT.h5 --vocab N [options]\n\n"
                          "Writes a corpus drawn from an order-k Markov chain with a known\n"
                          "entropy rate (stored as the source_entropy_nats attribute).\n",
                          args, visible, hidden, positional, vm))
    return 0;

  if (o.out.empty()) throw UsageError("missing OUT.h5 (see headroom data synth --help)");
  o.lengths = parse_length_spec(lengths_text, "--lengths");
  const SynthSummary s = synth_markov_dataset(o);
  std::printf("wrote %s: %lld documents, %lld tokens, vocab %lld, entropy rate %.6f nats/token\n",
              s.path.c_str(), static_cast<long long>(s.documents), static_cast<long long>(s.tokens),
              static_cast<long long>(s.vocab_size), s.entropy_rate_nats);
  return 0;
}

}  // namespace headroom
