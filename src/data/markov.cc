#include "data/markov.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "data/random.h"
#include "data/token_dataset_writer.h"
#include "util/error.h"

namespace headroom {

using data_detail::gamma_draw;
using data_detail::mix64;
using data_detail::standard_normal;
using data_detail::stream_seed;
using data_detail::uniform01;
using data_detail::uniform_below;

// ---- lengths ---------------------------------------------------------------

LengthSpec LengthSpec::fixed(int64_t length) {
  LengthSpec spec;
  spec.kind = Kind::kFixed;
  spec.min_length = spec.max_length = length;
  return spec;
}

LengthSpec LengthSpec::uniform(int64_t min_length, int64_t max_length) {
  LengthSpec spec;
  spec.kind = Kind::kUniform;
  spec.min_length = min_length;
  spec.max_length = max_length;
  return spec;
}

LengthSpec LengthSpec::lognormal(double median, double sigma, int64_t min_length,
                                 int64_t max_length) {
  LengthSpec spec;
  spec.kind = Kind::kLogNormal;
  spec.median = median;
  spec.sigma = sigma;
  spec.min_length = min_length;
  spec.max_length = max_length;
  return spec;
}

LengthSpec LengthSpec::histogram(std::vector<Bucket> buckets) {
  LengthSpec spec;
  spec.kind = Kind::kHistogram;
  spec.buckets = std::move(buckets);
  return spec;
}

void LengthSpec::validate() const {
  auto check_range = [](int64_t lo, int64_t hi, const std::string& what) {
    if (lo < 1 || hi < lo)
      throw UsageError("document lengths: " + what + " [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "] is not a range of lengths >= 1");
  };
  switch (kind) {
    case Kind::kFixed:
      check_range(min_length, min_length, "fixed length");
      return;
    case Kind::kUniform:
      check_range(min_length, max_length, "uniform");
      return;
    case Kind::kLogNormal:
      check_range(min_length, max_length, "lognormal clip");
      if (!(median > 0.0) || !(sigma >= 0.0))
        throw UsageError("document lengths: lognormal needs median > 0 and sigma >= 0");
      return;
    case Kind::kHistogram: {
      double total = 0.0;
      for (size_t b = 0; b < buckets.size(); ++b) {
        check_range(buckets[b].min_length, buckets[b].max_length,
                    "histogram bucket " + std::to_string(b));
        if (!(buckets[b].weight >= 0.0))
          throw UsageError("document lengths: histogram bucket " + std::to_string(b) +
                           " has a negative weight");
        total += buckets[b].weight;
      }
      if (!(total > 0.0))
        throw UsageError("document lengths: a histogram needs a bucket with positive weight");
      return;
    }
  }
}

int64_t LengthSpec::draw(std::mt19937_64& rng) const {
  auto uniform_in = [&rng](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(hi - lo + 1)));
  };
  switch (kind) {
    case Kind::kFixed:
      return min_length;
    case Kind::kUniform:
      return uniform_in(min_length, max_length);
    case Kind::kLogNormal: {
      const double x = median * std::exp(sigma * standard_normal(rng));
      // Clip in double first: a far tail must not overflow llround.
      const double clipped =
          std::clamp(x, static_cast<double>(min_length), static_cast<double>(max_length));
      return std::clamp(static_cast<int64_t>(std::llround(clipped)), min_length, max_length);
    }
    case Kind::kHistogram: {
      double total = 0.0;
      for (const Bucket& b : buckets)
        total += b.weight;
      const double u = uniform01(rng) * total;
      double acc = 0.0;
      const Bucket* chosen = nullptr;
      for (const Bucket& b : buckets) {
        if (b.weight <= 0.0) continue;
        chosen = &b;  // the last positive bucket absorbs rounding at u ~ total
        acc += b.weight;
        if (u < acc) break;
      }
      HR_CHECK(chosen != nullptr, "a validated histogram has a bucket with positive weight");
      return uniform_in(chosen->min_length, chosen->max_length);
    }
  }
  return min_length;
}

namespace {

std::string describe(const LengthSpec& l) {
  std::ostringstream out;
  switch (l.kind) {
    case LengthSpec::Kind::kFixed:
      out << "fixed(" << l.min_length << ")";
      break;
    case LengthSpec::Kind::kUniform:
      out << "uniform(" << l.min_length << ", " << l.max_length << ")";
      break;
    case LengthSpec::Kind::kLogNormal:
      out << "lognormal(median=" << l.median << ", sigma=" << l.sigma << ", clip=[" << l.min_length
          << ", " << l.max_length << "])";
      break;
    case LengthSpec::Kind::kHistogram:
      out << "histogram(";
      for (size_t b = 0; b < l.buckets.size(); ++b)
        out << (b ? ", " : "") << "[" << l.buckets[b].min_length << ", " << l.buckets[b].max_length
            << "]:" << l.buckets[b].weight;
      out << ")";
      break;
  }
  return out.str();
}

// Residual at which the stationary distribution counts as found (L1).
constexpr double kStationaryTolerance = 1e-12;
constexpr int kMaxPowerIterations = 100000;

}  // namespace

// ---- source ----------------------------------------------------------------

MarkovSource::MarkovSource(const MarkovSpec& spec) : spec_(spec) {
  const int64_t V = spec.vocab_size;
  if (V < 1 || V > std::numeric_limits<int32_t>::max())
    throw UsageError("markov: vocab_size = " + std::to_string(V) + " must be in [1, 2^31)");
  if (spec.order < 1) throw UsageError("markov: order must be at least 1");
  if (spec.branching < 1 || spec.branching > V)
    throw UsageError("markov: branching = " + std::to_string(spec.branching) +
                     " must be in [1, vocab_size = " + std::to_string(V) + "]");
  if (!(spec.concentration > 0.0)) throw UsageError("markov: concentration must be > 0");
  num_contexts_ = 1;
  for (int j = 0; j < spec.order; ++j) {
    if (num_contexts_ > kMaxContexts / V)
      throw UsageError("markov: vocab_size^order = " + std::to_string(V) + "^" +
                       std::to_string(spec.order) + " contexts exceed " +
                       std::to_string(kMaxContexts) +
                       ", the most whose entropy rate is computed exactly");
    num_contexts_ *= V;
  }
  num_distributions_ = spec.order == 1 ? num_contexts_ : std::min(num_contexts_, kMaxDistributions);

  // Successors (distinct, uniform over the vocabulary) and Dirichlet weights.
  const size_t branching = static_cast<size_t>(spec.branching);
  successors_.resize(static_cast<size_t>(num_distributions_) * branching);
  probabilities_.resize(successors_.size());
  std::vector<double> entropy(static_cast<size_t>(num_distributions_));
  std::vector<uint32_t> stamp(static_cast<size_t>(V), 0);  // "drawn for distribution d - 1"
  std::mt19937_64 rng(stream_seed(spec.seed, 0));
  for (int64_t d = 0; d < num_distributions_; ++d) {
    int32_t* next = &successors_[static_cast<size_t>(d) * branching];
    double* p = &probabilities_[static_cast<size_t>(d) * branching];
    const uint32_t mark = static_cast<uint32_t>(d) + 1;
    for (size_t b = 0; b < branching;) {
      const auto token = static_cast<int32_t>(uniform_below(rng, static_cast<uint64_t>(V)));
      if (stamp[static_cast<size_t>(token)] == mark) continue;
      stamp[static_cast<size_t>(token)] = mark;
      next[b++] = token;
    }
    double total = 0.0;
    for (size_t b = 0; b < branching; ++b)
      total += p[b] = gamma_draw(rng, spec.concentration);
    if (!(total > 0.0)) {  // every draw underflowed (tiny concentration): one certain successor
      p[0] = total = 1.0;
    }
    double h = 0.0;
    for (size_t b = 0; b < branching; ++b) {
      p[b] /= total;
      if (p[b] > 0.0) h -= p[b] * std::log(p[b]);
    }
    entropy[static_cast<size_t>(d)] = h;
  }

  // Stationary distribution by power iteration on the damped chain
  // Q = (1 - eps) P + eps I. Q has exactly P's stationary distributions but
  // is aperiodic (eigenvalue -1 of a period-2 P becomes 2 eps - 1), so the
  // iteration converges even when P is periodic, which a sparse random chain
  // can be; a small eps costs little speed where P mixes well. Starting from
  // uniform it converges to a stationary pi even if P is reducible, and any
  // stationary pi makes the claim in the header hold.
  constexpr double kDamping = 0.1;
  const size_t n = static_cast<size_t>(num_contexts_);
  const int64_t shift_out = num_contexts_ / V;  // V^(k-1): drops the oldest token
  std::vector<double> pi(n, 1.0 / static_cast<double>(n));
  std::vector<double> moved(n);
  double residual = 1.0;
  int iteration = 0;
  for (; iteration < kMaxPowerIterations && residual >= kStationaryTolerance; ++iteration) {
    std::fill(moved.begin(), moved.end(), 0.0);
    for (size_t s = 0; s < n; ++s) {
      if (pi[s] == 0.0) continue;
      const size_t d = static_cast<size_t>(distribution_of(static_cast<int64_t>(s)));
      // next_context(s, x) = base + x, without a division per edge.
      const size_t base = static_cast<size_t>((static_cast<int64_t>(s) % shift_out) * V);
      const int32_t* next = &successors_[d * branching];
      const double* p = &probabilities_[d * branching];
      for (size_t b = 0; b < branching; ++b)
        moved[base + static_cast<size_t>(next[b])] += pi[s] * p[b];
    }
    residual = 0.0;
    double total = 0.0;
    for (size_t s = 0; s < n; ++s) {
      residual += std::abs(moved[s] - pi[s]);  // ||pi P - pi||_1
      pi[s] = (1.0 - kDamping) * moved[s] + kDamping * pi[s];
      total += pi[s];
    }
    for (double& x : pi)
      x /= total;  // keep rounding from drifting the mass
  }
  if (residual >= kStationaryTolerance)
    throw UsageError("markov: no stationary distribution to 1e-12 after " +
                     std::to_string(iteration) + " iterations (residual " +
                     std::to_string(residual) + "); the chain mixes too slowly, raise branching");

  stationary_ = std::move(pi);
  stationary_cdf_.resize(n);
  double acc = 0.0;
  entropy_rate_ = 0.0;
  for (size_t s = 0; s < n; ++s) {
    acc += stationary_[s];
    stationary_cdf_[s] = acc;
    entropy_rate_ +=
        stationary_[s] * entropy[static_cast<size_t>(distribution_of(static_cast<int64_t>(s)))];
  }
}

int64_t MarkovSource::distribution_of(int64_t context) const {
  if (num_distributions_ == num_contexts_) return context;
  return static_cast<int64_t>(mix64(spec_.seed ^ mix64(static_cast<uint64_t>(context))) %
                              static_cast<uint64_t>(num_distributions_));
}

int64_t MarkovSource::context_of(std::span<const int32_t> last) const {
  HR_CHECK(static_cast<int64_t>(last.size()) == spec_.order, "a context is `order` tokens");
  int64_t context = 0;
  for (int32_t token : last)
    context = context * spec_.vocab_size + token;
  return context;
}

int64_t MarkovSource::next_context(int64_t context, int32_t token) const {
  // The newest token is the lowest base-V digit; the oldest falls off the top.
  return (context * spec_.vocab_size + token) % num_contexts_;
}

std::span<const int32_t> MarkovSource::successors(int64_t context) const {
  const size_t b = static_cast<size_t>(spec_.branching);
  return {&successors_[static_cast<size_t>(distribution_of(context)) * b], b};
}

std::span<const double> MarkovSource::probabilities(int64_t context) const {
  const size_t b = static_cast<size_t>(spec_.branching);
  return {&probabilities_[static_cast<size_t>(distribution_of(context)) * b], b};
}

double MarkovSource::log_prob(int64_t context, int32_t token) const {
  std::span<const int32_t> next = successors(context);
  std::span<const double> p = probabilities(context);
  for (size_t b = 0; b < next.size(); ++b)
    if (next[b] == token) return std::log(p[b]);
  return -std::numeric_limits<double>::infinity();
}

void MarkovSource::generate(int64_t length, std::mt19937_64& rng, std::vector<int32_t>& tokens,
                            std::vector<uint8_t>& mask) const {
  tokens.clear();
  mask.clear();
  const int64_t V = spec_.vocab_size;
  const double u = uniform01(rng) * stationary_cdf_.back();
  int64_t context =
      std::upper_bound(stationary_cdf_.begin(), stationary_cdf_.end(), u) - stationary_cdf_.begin();
  context = std::min(context, num_contexts_ - 1);
  // The start context's tokens, oldest (highest digit) first.
  int64_t place = num_contexts_ / V;
  for (int j = 0; j < spec_.order && static_cast<int64_t>(tokens.size()) < length; ++j) {
    tokens.push_back(static_cast<int32_t>((context / place) % V));
    mask.push_back(0);
    place /= V;
  }
  while (static_cast<int64_t>(tokens.size()) < length) {
    std::span<const int32_t> next = successors(context);
    std::span<const double> p = probabilities(context);
    const double x = uniform01(rng);
    double acc = 0.0;
    int32_t token = -1;
    for (size_t b = 0; b < next.size(); ++b) {
      if (p[b] <= 0.0) continue;
      token = next[b];  // the last possible successor absorbs rounding at x ~ 1
      acc += p[b];
      if (x < acc) break;
    }
    tokens.push_back(token);
    mask.push_back(1);
    context = next_context(context, token);
  }
}

double write_markov_corpus(const std::string& path, const MarkovSpec& spec,
                           const LengthSpec& lengths, int64_t num_documents, uint64_t seed) {
  lengths.validate();
  if (num_documents < 0) throw UsageError("markov corpus: num_documents must be >= 0");
  const MarkovSource source(spec);

  TokenDatasetAttributes attributes;
  attributes.vocab_size = spec.vocab_size;
  attributes.eos_id = -1;  // documents are delimited by /offsets, not by a token
  attributes.bos_id = -1;
  attributes.tokenizer = "none (synthetic Markov source)";
  std::ostringstream created_by;
  created_by.precision(17);
  created_by << "headroom write_markov_corpus: vocab_size=" << spec.vocab_size
             << " order=" << spec.order << " branching=" << spec.branching
             << " concentration=" << spec.concentration << " source_seed=" << spec.seed
             << " lengths=" << describe(lengths) << " documents=" << num_documents
             << " seed=" << seed;
  attributes.created_by = created_by.str();
  attributes.source_entropy_nats = source.entropy_rate_nats();

  const bool with_mask = spec.order > 1;  // see markov.h: the start context is not a target
  TokenDatasetWriter writer(path, attributes, with_mask);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (int64_t d = 0; d < num_documents; ++d) {
    std::mt19937_64 rng(stream_seed(seed, static_cast<uint64_t>(d)));
    source.generate(lengths.draw(rng), rng, tokens, mask);
    writer.append_document(tokens,
                           with_mask ? std::span<const uint8_t>(mask) : std::span<const uint8_t>());
  }
  writer.finish();
  return source.entropy_rate_nats();
}

}  // namespace headroom
