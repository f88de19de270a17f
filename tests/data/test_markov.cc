// The synthetic Markov source: its computed entropy rate against an
// independent dense solve, against the empirical loss of a perfect model on
// a generated corpus, and its determinism by seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "data/markov.h"
#include "data/token_dataset.h"
#include "data_test_util.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::TempDir;
using testing::usage_error;

// The stationary distribution by a dense linear solve: pi (P - I) = 0 with
// one equation replaced by sum(pi) = 1 (Gaussian elimination, partial
// pivoting). Independent of the source's power iteration.
std::vector<double> dense_stationary(const MarkovSource& source) {
  const size_t n = static_cast<size_t>(source.num_contexts());
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));  // rows: equations
  for (size_t s = 0; s < n; ++s) {
    auto next = source.successors(static_cast<int64_t>(s));
    auto p = source.probabilities(static_cast<int64_t>(s));
    for (size_t b = 0; b < next.size(); ++b) {
      const size_t to = static_cast<size_t>(source.next_context(static_cast<int64_t>(s), next[b]));
      a[to][s] += p[b];  // equation `to`: sum_s pi(s) P(s -> to) - pi(to) = 0
    }
    a[s][s] -= 1.0;
  }
  for (size_t s = 0; s < n; ++s)
    a[n - 1][s] = 1.0;
  a[n - 1][n] = 1.0;
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    std::swap(a[col], a[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c <= n; ++c)
        a[r][c] -= f * a[col][c];
    }
  }
  std::vector<double> pi(n);
  for (size_t s = 0; s < n; ++s)
    pi[s] = a[s][n] / a[s][s];
  return pi;
}

double conditional_entropy(const MarkovSource& source, int64_t context) {
  double h = 0.0;
  for (double p : source.probabilities(context))
    if (p > 0.0) h -= p * std::log(p);
  return h;
}

TEST(Markov, EntropyRateMatchesADenseSolve) {
  for (const MarkovSpec spec : {MarkovSpec{5, 1, 5, 1.0, 3}, MarkovSpec{7, 1, 7, 0.3, 4},
                                MarkovSpec{3, 2, 3, 1.0, 5}, MarkovSpec{4, 3, 4, 2.0, 6}}) {
    MarkovSource source(spec);
    std::vector<double> pi = dense_stationary(source);
    double h = 0.0;
    for (size_t s = 0; s < pi.size(); ++s) {
      EXPECT_NEAR(source.stationary()[s], pi[s], 1e-11) << "context " << s;
      h += pi[s] * conditional_entropy(source, static_cast<int64_t>(s));
    }
    EXPECT_NEAR(source.entropy_rate_nats(), h, 1e-11)
        << "V=" << spec.vocab_size << " k=" << spec.order;
    EXPECT_GT(h, 0.0);
  }
}

TEST(Markov, EveryPositionIsStationaryFromTheFirstTarget) {
  // Documents of two tokens: the single target is predicted from the start
  // context. Its mean loss under the true P must already be H; a start drawn
  // uniformly instead of from pi would give E_uniform[H(P(.|s))], which this
  // test checks is far enough away to be caught.
  MarkovSpec spec{40, 1, 6, 0.3, 11};
  MarkovSource source(spec);
  const double h = source.entropy_rate_nats();
  double uniform_start = 0.0;
  for (int64_t s = 0; s < source.num_contexts(); ++s)
    uniform_start += conditional_entropy(source, s) / static_cast<double>(source.num_contexts());

  const int n = 40000;
  std::mt19937_64 rng(99);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<double> first_tokens(static_cast<size_t>(source.num_contexts()), 0.0);
  double sum = 0.0;
  double sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    source.generate(2, rng, tokens, mask);
    ASSERT_EQ(tokens.size(), 2u);
    first_tokens[static_cast<size_t>(tokens[0])] += 1.0 / n;
    const double nll = -source.log_prob(tokens[0], tokens[1]);
    sum += nll;
    sum_sq += nll * nll;
  }
  const double mean = sum / n;
  const double se = std::sqrt((sum_sq / n - mean * mean) / (n - 1));
  EXPECT_LT(std::abs(mean - h), 4 * se) << "mean " << mean << " H " << h << " se " << se;
  EXPECT_GT(std::abs(uniform_start - h), 8 * se) << "this test could not tell a uniform start";
  for (size_t s = 0; s < first_tokens.size(); ++s) {
    const double p = source.stationary()[s];
    EXPECT_LT(std::abs(first_tokens[s] - p), 5 * std::sqrt(p * (1 - p) / n) + 1e-12)
        << "first-token frequency of " << s;
  }
}

// Per-document sums of a perfect model's loss over the counted targets of a
// corpus read back from disk, checking the mask on the way.
struct CorpusLoss {
  std::vector<double> nll;     // per document
  std::vector<double> counts;  // counted targets per document
};

CorpusLoss perfect_model_loss(const TokenDataset& dataset, const MarkovSource& source) {
  const int k = source.spec().order;
  CorpusLoss loss;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (int64_t d = 0; d < dataset.num_documents(); ++d) {
    dataset.read_document(d, tokens, mask);
    EXPECT_EQ(mask.empty(), k == 1) << "order 1 needs no mask, order > 1 does";
    double nll = 0.0;
    double count = 0.0;
    for (size_t j = 1; j < tokens.size(); ++j) {
      const bool counted = j >= static_cast<size_t>(k);
      if (!mask.empty()) {
        EXPECT_EQ(mask[j], counted ? 1 : 0) << "document " << d << " pos " << j;
      }
      if (!counted) continue;
      const int64_t context = source.context_of(
          std::span<const int32_t>(&tokens[j - static_cast<size_t>(k)], static_cast<size_t>(k)));
      const double lp = source.log_prob(context, tokens[j]);
      EXPECT_TRUE(std::isfinite(lp)) << "a token that cannot follow its context";
      nll -= lp;
      count += 1.0;
    }
    loss.nll.push_back(nll);
    loss.counts.push_back(count);
  }
  return loss;
}

// Mean loss per target and its standard error, treating documents (which are
// independent; tokens within one are not) as clusters of a ratio estimator.
std::pair<double, double> ratio_mean_and_se(const CorpusLoss& loss) {
  const double total_nll = std::accumulate(loss.nll.begin(), loss.nll.end(), 0.0);
  const double total_count = std::accumulate(loss.counts.begin(), loss.counts.end(), 0.0);
  const double mean = total_nll / total_count;
  const double n = static_cast<double>(loss.nll.size());
  double var = 0.0;
  for (size_t d = 0; d < loss.nll.size(); ++d) {
    const double r = loss.nll[d] - mean * loss.counts[d];
    var += r * r;
  }
  var /= (n - 1);
  const double mean_count = total_count / n;
  return {mean, std::sqrt(var / n) / mean_count};
}

void expect_corpus_at_entropy(const MarkovSpec& spec, const LengthSpec& lengths, int64_t docs) {
  TempDir dir;
  const std::string path = dir.file("markov.h5");
  const double h = write_markov_corpus(path, spec, lengths, docs, 2024);
  MarkovSource source(spec);
  EXPECT_EQ(h, source.entropy_rate_nats());
  TokenDataset dataset = TokenDataset::open(path, spec.vocab_size);
  ASSERT_TRUE(dataset.attributes().source_entropy_nats.has_value());
  EXPECT_EQ(*dataset.attributes().source_entropy_nats, h);
  EXPECT_EQ(dataset.attributes().vocab_size, spec.vocab_size);
  expect_contains(dataset.attributes().created_by, "order=" + std::to_string(spec.order));
  auto [mean, se] = ratio_mean_and_se(perfect_model_loss(dataset, source));
  EXPECT_LT(std::abs(mean - h), 4 * se) << "mean " << mean << " H " << h << " se " << se;
  // The tolerance is tight: a source off by 1% of H would be caught.
  EXPECT_LT(4 * se, 0.01 * h) << "corpus too small for a meaningful check";
}

TEST(Markov, CorpusLossOfAPerfectModelIsTheEntropyRateOrder1) {
  expect_corpus_at_entropy(MarkovSpec{64, 1, 8, 1.0, 1}, LengthSpec::fixed(200), 2000);
}

TEST(Markov, CorpusLossOfAPerfectModelIsTheEntropyRateOrder2Hashed) {
  // 260^2 = 67600 contexts share 65536 distributions by hash; lengths from 1
  // (no targets at all) to 800.
  expect_corpus_at_entropy(MarkovSpec{260, 2, 6, 0.5, 9}, LengthSpec::lognormal(120, 0.8, 1, 800),
                           3000);
}

// MarkovSpec{50, 1, 4, 0.5, 42}, corpus seed 7, uniform(1, 64) lengths.
constexpr double kGoldenEntropy = 0.88427571915021963;
const std::vector<int32_t> kGoldenFirstTokens = {2,  39, 2,  7,  7, 7, 7,  1,
                                                 33, 40, 30, 43, 0, 6, 49, 13};

TEST(Markov, DeterministicBySeed) {
  TempDir dir;
  MarkovSpec spec{50, 1, 4, 0.5, 42};
  auto read_all = [](const std::string& path) {
    TokenDataset dataset = TokenDataset::open(path, 0);
    std::vector<std::vector<int32_t>> documents(static_cast<size_t>(dataset.num_documents()));
    std::vector<uint8_t> mask;
    for (size_t d = 0; d < documents.size(); ++d)
      dataset.read_document(static_cast<int64_t>(d), documents[d], mask);
    return documents;
  };
  const LengthSpec lengths = LengthSpec::uniform(1, 64);
  write_markov_corpus(dir.file("a.h5"), spec, lengths, 12, 7);
  write_markov_corpus(dir.file("b.h5"), spec, lengths, 12, 7);
  write_markov_corpus(dir.file("c.h5"), spec, lengths, 12, 8);
  write_markov_corpus(dir.file("prefix.h5"), spec, lengths, 5, 7);
  const auto a = read_all(dir.file("a.h5"));
  EXPECT_EQ(a, read_all(dir.file("b.h5")));
  EXPECT_NE(a, read_all(dir.file("c.h5")));
  const auto prefix = read_all(dir.file("prefix.h5"));
  EXPECT_EQ(prefix, std::vector<std::vector<int32_t>>(a.begin(), a.begin() + 5));

  // Golden values: the same on every machine and standard library (no std::
  // distributions are used). A change here changes every synthetic corpus.
  MarkovSource source(spec);
  EXPECT_NEAR(source.entropy_rate_nats(), kGoldenEntropy, 1e-10);
  std::vector<int32_t> first_tokens;
  for (const auto& document : a)
    for (int32_t token : document)
      if (first_tokens.size() < kGoldenFirstTokens.size()) first_tokens.push_back(token);
  EXPECT_EQ(first_tokens, kGoldenFirstTokens);
  MarkovSpec other = spec;
  other.seed = 43;
  EXPECT_NE(MarkovSource(other).entropy_rate_nats(), source.entropy_rate_nats());
}

TEST(Markov, LengthSpecs) {
  std::mt19937_64 rng(5);
  const int n = 20000;
  LengthSpec fixed = LengthSpec::fixed(77);
  LengthSpec uniform = LengthSpec::uniform(3, 9);
  LengthSpec lognormal = LengthSpec::lognormal(1000, 1.0, 100, 4000);
  LengthSpec histogram =
      LengthSpec::histogram({{1, 8192, 191}, {8193, 12288, 32}, {24576, 24576, 13}});
  std::vector<int64_t> u, l;
  int in_bucket[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(fixed.draw(rng), 77);
    u.push_back(uniform.draw(rng));
    l.push_back(lognormal.draw(rng));
    const int64_t h = histogram.draw(rng);
    if (h <= 8192)
      in_bucket[0]++;
    else if (h >= 8193 && h <= 12288)
      in_bucket[1]++;
    else if (h == 24576)
      in_bucket[2]++;
    else
      ADD_FAILURE() << "histogram drew " << h;
  }
  EXPECT_EQ(*std::min_element(u.begin(), u.end()), 3);
  EXPECT_EQ(*std::max_element(u.begin(), u.end()), 9);
  EXPECT_EQ(*std::min_element(l.begin(), l.end()), 100);   // clipped below: P(x<100) ~ 1%
  EXPECT_EQ(*std::max_element(l.begin(), l.end()), 4000);  // clipped above: P(x>4000) ~ 8%
  std::nth_element(l.begin(), l.begin() + n / 2, l.end());
  EXPECT_NEAR(static_cast<double>(l[n / 2]), 1000.0, 50.0);
  const double weights[3] = {191.0 / 236, 32.0 / 236, 13.0 / 236};
  for (int b = 0; b < 3; ++b)
    EXPECT_NEAR(in_bucket[b] / static_cast<double>(n), weights[b],
                5 * std::sqrt(weights[b] * (1 - weights[b]) / n));

  expect_contains(usage_error([] { LengthSpec::uniform(5, 4).validate(); }),
                  "uniform [5, 4] is not a range of lengths >= 1");
  expect_contains(usage_error([] { LengthSpec::fixed(0).validate(); }), "fixed length [0, 0]");
  expect_contains(usage_error([] { LengthSpec::lognormal(0, 1, 1, 5).validate(); }),
                  "lognormal needs median > 0");
  expect_contains(usage_error([] { LengthSpec::histogram({}).validate(); }),
                  "a histogram needs a bucket with positive weight");
}

TEST(Markov, ImpossibleSpecs) {
  expect_contains(usage_error([] {
                    MarkovSource(MarkovSpec{8, 1, 9, 1.0, 1});
                  }),
                  "branching = 9 must be in [1, vocab_size = 8]");
  expect_contains(usage_error([] {
                    MarkovSource(MarkovSpec{8, 0, 2, 1.0, 1});
                  }),
                  "order must be at least 1");
  expect_contains(usage_error([] {
                    MarkovSource(MarkovSpec{3000, 2, 8, 1.0, 1});
                  }),
                  "vocab_size^order = 3000^2 contexts exceed");
  expect_contains(usage_error([] {
                    MarkovSource(MarkovSpec{8, 1, 2, 0.0, 1});
                  }),
                  "concentration must be > 0");
}

}  // namespace
}  // namespace headroom
