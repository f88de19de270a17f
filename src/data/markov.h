// A synthetic Markov source with a known entropy rate, and corpora drawn from
// it: the "loss falls to the known entropy" test of DESIGN.md needs data
// whose best achievable cross-entropy is computed, not guessed.
//
// Source. An order-k chain over tokens [0, V): the next token depends on the
// last k tokens (the context). Each context has a sparse next-token
// distribution: `branching` distinct successors with Dirichlet(concentration)
// weights. For k = 1 every context (= token) has its own distribution; for
// k > 1 there are V^k contexts, and a context's distribution is picked by
// hashing it into a table of at most kMaxDistributions, which keeps memory
// bounded while the chain still depends on all k tokens. Everything is a
// function of MarkovSpec::seed alone (data/random.h: no standard
// library distributions).
//
// Entropy rate. With pi the stationary distribution over contexts,
//   H = sum_s pi(s) * H(P(. | s))    nats per token,
// computed exactly (pi by power iteration to 1e-12 in L1) at construction.
// Contexts are capped at kMaxContexts (2^20) so that pi fits in memory and
// the iteration stays in seconds: its cost is (contexts x branching) per
// sweep, tens of sweeps; ~15 s on one core at the cap, ms for order 1.
//
// Why a perfect model's expected loss is exactly H, per counted target: a
// document starts from a context drawn from pi, so the context before every
// generated token is distributed as pi (pi is stationary: one step of the
// chain maps pi to pi). The expected negative log-likelihood of a generated
// token under the true P, given its context s, is H(P(. | s)); averaged over
// s ~ pi it is H — at every position, not just asymptotically. The k context
// tokens a document starts with are not generated from a full context, so for
// k > 1 they carry loss_mask = 0 (positions 1..k-1 would otherwise be
// targets predicted from fewer than k tokens, with a higher entropy than H).
// For k = 1 the first token is never a target anyway and no mask is written.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace headroom {

struct MarkovSpec {
  int64_t vocab_size = 256;    // V
  int order = 1;               // k >= 1
  int branching = 8;           // successors per context, <= V
  double concentration = 1.0;  // Dirichlet alpha of the successor weights; small = peaky
  uint64_t seed = 1;
};

// Document lengths of a synthetic corpus.
struct LengthSpec {
  enum class Kind : uint8_t { kFixed, kUniform, kLogNormal, kHistogram };

  // One bucket of a histogram: lengths uniform in [min_length, max_length],
  // chosen with probability weight / sum(weights). min == max is a point.
  struct Bucket {
    int64_t min_length = 1;
    int64_t max_length = 1;
    double weight = 1.0;
  };

  Kind kind = Kind::kFixed;
  int64_t min_length = 512;  // fixed: the length; uniform / lognormal: the lower clip
  int64_t max_length = 512;  // uniform / lognormal: the upper clip
  double median = 512.0;     // lognormal: exp(mu)
  double sigma = 0.5;        // lognormal: of log(length)
  std::vector<Bucket> buckets;

  static LengthSpec fixed(int64_t length);
  static LengthSpec uniform(int64_t min_length, int64_t max_length);
  static LengthSpec lognormal(double median, double sigma, int64_t min_length, int64_t max_length);
  static LengthSpec histogram(std::vector<Bucket> buckets);

  // Throws UsageError on an impossible spec (lengths < 1, min > max, no or
  // negative weights).
  void validate() const;
  int64_t draw(std::mt19937_64& rng) const;
};

class MarkovSource {
 public:
  static constexpr int64_t kMaxContexts = int64_t{1} << 20;
  static constexpr int64_t kMaxDistributions = int64_t{1} << 16;

  // Builds the chain and its stationary distribution; throws UsageError for
  // an impossible spec (branching > V, V^k > kMaxContexts, ...).
  explicit MarkovSource(const MarkovSpec& spec);

  const MarkovSpec& spec() const { return spec_; }
  int64_t num_contexts() const { return num_contexts_; }
  double entropy_rate_nats() const { return entropy_rate_; }
  const std::vector<double>& stationary() const { return stationary_; }

  // The context after the k tokens `last` (oldest first); and the context
  // after `context` emits `token`.
  int64_t context_of(std::span<const int32_t> last) const;
  int64_t next_context(int64_t context, int32_t token) const;
  // The successors of a context and their probabilities (same order).
  std::span<const int32_t> successors(int64_t context) const;
  std::span<const double> probabilities(int64_t context) const;
  // log P(token | context); -infinity for a token that never follows it.
  double log_prob(int64_t context, int32_t token) const;

  // A document of `length` tokens: the first min(k, length) are a context
  // drawn from pi, the rest follow the chain. `mask` gets 0 for the context
  // tokens and 1 for generated ones (see the header comment).
  void generate(int64_t length, std::mt19937_64& rng, std::vector<int32_t>& tokens,
                std::vector<uint8_t>& mask) const;

 private:
  int64_t distribution_of(int64_t context) const;

  MarkovSpec spec_;
  int64_t num_contexts_ = 0;            // V^k
  int64_t num_distributions_ = 0;       // min(V^k, kMaxDistributions)
  std::vector<int32_t> successors_;     // num_distributions x branching
  std::vector<double> probabilities_;   // num_distributions x branching
  std::vector<double> stationary_;      // num_contexts
  std::vector<double> stationary_cdf_;  // num_contexts, for drawing a start
  double entropy_rate_ = 0.0;
};

// Writes `num_documents` documents from the source to `path` (atomically, via
// TokenDatasetWriter) with source_entropy_nats = the entropy rate, and a
// created_by naming every parameter. Document d is drawn from its own stream
// (seed, d), so a corpus of n documents is a prefix of one of n + m.
// Returns the entropy rate in nats.
double write_markov_corpus(const std::string& path, const MarkovSpec& spec,
                           const LengthSpec& lengths, int64_t num_documents, uint64_t seed);

}  // namespace headroom
