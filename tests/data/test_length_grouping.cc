// Padded micro-batches with length grouping (BatchOptions::group_pool, the
// pool rule of data/batcher.h): determinism, every document once per epoch,
// the token budget after padding, the pools, the padding it saves, resuming
// at a cursor, and the options it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/markov.h"
#include "data/random.h"
#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "data_test_util.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::TempDir;
using testing::usage_error;

constexpr int64_t kVocab = 1000;

// A dataset of documents with the given lengths, in a temp folder; token t
// of document d is (d + 7t) % kVocab.
struct Corpus {
  TempDir dir;
  std::vector<int64_t> lengths;
  TokenDataset dataset;

  explicit Corpus(std::vector<int64_t> lengths_in)
      : lengths(std::move(lengths_in)), dataset(write(dir, lengths)) {}

  static TokenDataset write(const TempDir& dir, const std::vector<int64_t>& lengths) {
    return testing::write_corpus(
        dir, lengths, kVocab, "test_length_grouping",
        [](int64_t d, int64_t t) { return static_cast<int32_t>((d + 7 * t) % kVocab); });
  }
};

int64_t round_up(int64_t width, int64_t m) {
  return m > 0 ? (width + m - 1) / m * m : width;
}

// `count` lengths drawn from `spec` by a stream of `seed`.
std::vector<int64_t> draw_lengths(const LengthSpec& spec, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(data_detail::stream_seed(seed, 0));
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < count; ++i)
    lengths.push_back(spec.draw(rng));
  return lengths;
}

// The lognormal mix of issue 45 (`data synth --lengths
// lognormal:900,1.0,16-16384`, 600 documents).
std::vector<int64_t> lognormal_mix() {
  return draw_lengths(LengthSpec::lognormal(900.0, 1.0, 16, 16384), 600, 45);
}

BatchOptions grouped_options() {
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.group_pool = 4;
  o.max_tokens_per_micro_batch = 256;
  o.seed = 17;
  return o;
}

// Padding / padded tokens over one epoch of make_bins.
double epoch_padding_share(const std::vector<int64_t>& lengths, const BatchOptions& o,
                           int64_t epoch) {
  std::vector<int64_t> kept(lengths.size());
  for (size_t d = 0; d < kept.size(); ++d)
    kept[d] = static_cast<int64_t>(d);
  const EpochBins bins = make_bins(visiting_order(kept, o, epoch), lengths, o, epoch);
  int64_t real = 0, padded = 0;
  for (int64_t d : bins.order)
    real += lengths[static_cast<size_t>(d)];
  for (int64_t cost : bins.bin_cost)
    padded += cost;
  return 1.0 - static_cast<double>(real) / static_cast<double>(padded);
}

TEST(LengthGrouping, IsDeterministicFromTheSeedAndTheEpoch) {
  Corpus c(draw_lengths(LengthSpec::uniform(1, 200), 120, 1));
  const BatchOptions o = grouped_options();
  Batcher a(c.dataset, o), b(c.dataset, o);
  EXPECT_EQ(a.epoch_bins(0), b.epoch_bins(0));
  EXPECT_EQ(a.epoch_bins(3), b.epoch_bins(3));
  EXPECT_NE(a.epoch_bins(0), a.epoch_bins(1)) << "each epoch shuffles anew";
  BatchOptions other = o;
  other.seed = 18;
  EXPECT_NE(Batcher(c.dataset, other).epoch_bins(0), a.epoch_bins(0));
  // The plans, dealt to ranks, agree as well.
  for (int step = 0; step < 10; ++step) {
    const auto pa = a.next_step_plan(), pb = b.next_step_plan();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t r = 0; r < pa.size(); ++r)
      for (size_t m = 0; m < pa[r].size(); ++m)
        EXPECT_EQ(pa[r][m].documents, pb[r][m].documents);
  }
}

TEST(LengthGrouping, PlacesEveryDocumentExactlyOncePerEpoch) {
  std::vector<int64_t> lengths = draw_lengths(LengthSpec::uniform(1, 300), 150, 2);
  for (size_t d = 0; d < lengths.size(); d += 11)
    lengths[d] = 0;  // empty documents are never placed
  Corpus c(lengths);
  for (int64_t pool : {1, 3, 1000}) {
    BatchOptions o = grouped_options();
    o.group_pool = pool;
    for (bool shuffle : {true, false}) {
      o.shuffle = shuffle;
      Batcher batcher(c.dataset, o);
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        std::vector<int64_t> placed;
        for (const std::vector<int64_t>& bin : batcher.epoch_bins(epoch)) {
          EXPECT_FALSE(bin.empty());
          placed.insert(placed.end(), bin.begin(), bin.end());
        }
        std::sort(placed.begin(), placed.end());
        std::vector<int64_t> expected;
        for (size_t d = 0; d < lengths.size(); ++d)
          if (lengths[d] > 0) expected.push_back(static_cast<int64_t>(d));
        EXPECT_EQ(placed, expected) << "pool " << pool << ", epoch " << epoch;
      }
    }
  }
}

TEST(LengthGrouping, MicroBatchesStayWithinTheBudgetAfterPadding) {
  // Lengths up to 600 against a budget of 256: documents longer than the
  // budget get a micro-batch of their own, as with buckets.
  Corpus c(draw_lengths(LengthSpec::lognormal(60.0, 1.2, 1, 600), 300, 3));
  for (int64_t multiple : {0, 8, 48}) {
    for (int64_t cap : {0, 3}) {
      BatchOptions o = grouped_options();
      o.pad_to_multiple_of = multiple;
      o.micro_batch_size = cap;
      o.world_size = 2;
      o.grad_accum = 2;
      Batcher batcher(c.dataset, o);
      int64_t over = 0;
      for (int step = 0; step < 60; ++step)
        for (const std::vector<MicroBatchPlan>& rank : batcher.next_step_plan())
          for (const MicroBatchPlan& mb : rank) {
            const int64_t rows = static_cast<int64_t>(mb.documents.size());
            ASSERT_GE(rows, 1);
            EXPECT_EQ(mb.width, round_up(mb.longest, multiple));
            EXPECT_EQ(mb.tokens, rows * mb.width);
            EXPECT_EQ(mb.bucket, -1);
            EXPECT_GE(mb.pool, 0);
            EXPECT_LE(rows, cap > 0 ? cap : rows);
            if (mb.tokens > o.max_tokens_per_micro_batch) {
              EXPECT_EQ(rows, 1) << "only a single row may exceed the budget";
              ++over;
            } else {
              // As many rows as fit: one more would not.
              const int64_t fit = std::max<int64_t>(1, o.max_tokens_per_micro_batch / mb.width);
              EXPECT_LE(rows, fit);
            }
            if (step < 2) {  // the tokens as planned
              const Batch batch = batcher.build(mb);
              EXPECT_EQ(batch.size(), mb.tokens);
              EXPECT_EQ(batch.padding, mb.padding);
            }
          }
      EXPECT_GT(over, 0) << "the corpus has documents past the budget";
    }
  }
}

TEST(LengthGrouping, PoolsAreConsecutiveStretchesOfTheVisitingOrderSortedLongestFirst) {
  const std::vector<int64_t> lengths = draw_lengths(LengthSpec::uniform(1, 500), 200, 4);
  BatchOptions o = grouped_options();
  o.pad_to_multiple_of = 16;
  std::vector<int64_t> kept(lengths.size());
  for (size_t d = 0; d < kept.size(); ++d)
    kept[d] = static_cast<int64_t>(d);
  for (bool shuffle : {true, false}) {
    o.shuffle = shuffle;
    const std::vector<int64_t> visit = visiting_order(kept, o, 2);
    const EpochBins bins = make_bins(visit, lengths, o, 2);
    ASSERT_EQ(bins.bin_pool.size(), static_cast<size_t>(bins.num_bins()));
    EXPECT_TRUE(bins.bin_bucket.empty());
    // The pool rule by hand: documents until their rounded rows reach
    // group_pool * budget tokens.
    // group_pool * budget tokens, a rest worth less than half a pool joining
    // the last.
    const int64_t pool_tokens = o.group_pool * o.max_tokens_per_micro_batch;
    std::vector<int64_t> rest(visit.size() + 1, 0);
    for (size_t i = visit.size(); i-- > 0;)
      rest[i] =
          rest[i + 1] + round_up(lengths[static_cast<size_t>(visit[i])], o.pad_to_multiple_of);
    std::vector<std::set<int64_t>> pools(1);
    int64_t tokens = 0;
    for (size_t i = 0; i < visit.size(); ++i) {
      if (tokens >= pool_tokens && rest[i] >= pool_tokens / 2) {
        pools.emplace_back();
        tokens = 0;
      }
      pools.back().insert(visit[i]);
      tokens += round_up(lengths[static_cast<size_t>(visit[i])], o.pad_to_multiple_of);
    }
    EXPECT_GT(pools.size(), 10u);
    std::vector<std::set<int64_t>> got(pools.size());
    std::vector<int64_t> previous_width(pools.size(), INT64_MAX);
    bool in_pool_order = true;
    for (int64_t b = 0; b < bins.num_bins(); ++b) {
      const size_t pool = static_cast<size_t>(bins.bin_pool[static_cast<size_t>(b)]);
      ASSERT_LT(pool, pools.size());
      int64_t longest = 0;
      for (int64_t i = bins.bin_starts[static_cast<size_t>(b)];
           i < bins.bin_starts[static_cast<size_t>(b) + 1]; ++i) {
        const int64_t d = bins.order[static_cast<size_t>(i)];
        got[pool].insert(d);
        longest = std::max(longest, lengths[static_cast<size_t>(d)]);
      }
      const int64_t width = round_up(longest, o.pad_to_multiple_of);
      if (b > 0 && pool < static_cast<size_t>(bins.bin_pool[static_cast<size_t>(b) - 1]))
        in_pool_order = false;
      // Without shuffle the bins of a pool come longest first.
      EXPECT_LE(width, shuffle ? width : previous_width[pool]);
      previous_width[pool] = width;
    }
    EXPECT_EQ(got, pools);
    EXPECT_EQ(in_pool_order, !shuffle) << "the micro-batches are shuffled over the epoch";
  }
}

TEST(LengthGrouping, WastesAtMostFivePercentOnTheLognormalMix) {
  const std::vector<int64_t> lengths = lognormal_mix();
  BatchOptions plain;
  plain.mode = BatchOptions::Mode::kPadded;
  plain.micro_batch_size = 8;
  plain.max_tokens_per_micro_batch = 16384;
  BatchOptions grouped = plain;
  grouped.micro_batch_size = 0;
  grouped.group_pool = 50;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const double share = epoch_padding_share(lengths, grouped, epoch);
    EXPECT_LE(share, 0.05) << "epoch " << epoch;
    EXPECT_GT(epoch_padding_share(lengths, plain, epoch), 0.3) << "what grouping saves";
  }
  // Smaller pools sort fewer documents together, and waste more, yet far
  // less than plain padding.
  grouped.group_pool = 10;
  EXPECT_LT(epoch_padding_share(lengths, grouped, 0), 0.5 * epoch_padding_share(lengths, plain, 0));
}

TEST(LengthGrouping, ResumingAtACursorGivesTheIdenticalFollowingBatches) {
  Corpus c(draw_lengths(LengthSpec::lognormal(40.0, 0.8, 1, 300), 90, 5));
  for (int rank = 0; rank < 2; ++rank) {
    BatchOptions o = grouped_options();
    o.group_pool = 3;
    o.max_tokens_per_micro_batch = 160;
    o.pad_to_multiple_of = 8;
    o.grad_accum = 2;
    o.world_size = 2;
    o.rank = rank;
    Batcher original(c.dataset, o);
    const int64_t bins_per_epoch = static_cast<int64_t>(original.epoch_bins(0).size());
    for (int step = 0; step < 3; ++step)
      original.next_step();
    const Cursor saved = original.cursor();
    ASSERT_EQ(saved.epoch, 0);
    ASSERT_GT(saved.position, 0);
    // Across two epoch boundaries.
    const int steps = static_cast<int>(2 * bins_per_epoch / 4) + 2;
    std::vector<std::vector<Batch>> expected;
    std::vector<std::vector<std::vector<MicroBatchPlan>>> expected_plans;
    Batcher planner(c.dataset, o);
    planner.set_cursor(saved);
    for (int step = 0; step < steps; ++step) {
      expected.push_back(original.next_step());
      expected_plans.push_back(planner.next_step_plan());
    }
    EXPECT_GE(original.cursor().epoch, 2);

    Batcher resumed(c.dataset, o);
    resumed.set_cursor(saved);
    EXPECT_EQ(resumed.cursor(), saved);
    for (int step = 0; step < steps; ++step) {
      const std::vector<Batch> got = resumed.next_step();
      const std::vector<Batch>& want = expected[static_cast<size_t>(step)];
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << "step " << step;
        EXPECT_EQ(got[i].cu_seqlens, want[i].cu_seqlens);
        EXPECT_EQ(got[i].positions, want[i].positions);
        EXPECT_EQ(got[i].padding, want[i].padding);
        // And they are this rank's micro-batches of the plan.
        const MicroBatchPlan& mb =
            expected_plans[static_cast<size_t>(step)][static_cast<size_t>(rank)][i];
        EXPECT_EQ(got[i].size(), mb.tokens);
      }
    }
    EXPECT_EQ(resumed.cursor(), original.cursor());
  }
}

TEST(LengthGrouping, OffByDefaultLeavesPlainPaddedBatchesAlone) {
  Corpus c({5, 3, 8, 2, 4, 7, 1});
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.micro_batch_size = 3;
  EXPECT_EQ(o.group_pool, 0);
  Batcher batcher(c.dataset, o);
  const std::vector<int64_t> visit =
      visiting_order(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}, o, 0);
  EXPECT_EQ(batcher.epoch_bins(0),
            (std::vector<std::vector<int64_t>>{
                {visit[0], visit[1], visit[2]}, {visit[3], visit[4], visit[5]}, {visit[6]}}));
  EXPECT_EQ(batcher.next_step_plan()[0][0].pool, -1);
}

TEST(LengthGrouping, RefusesOptionsItCannotServe) {
  Corpus c({5, 3, 8, 2});
  auto refused = [&c](BatchOptions o) {
    return usage_error([&] { Batcher batcher(c.dataset, o); });
  };
  BatchOptions o = grouped_options();
  o.mode = BatchOptions::Mode::kPacked;
  expect_contains(refused(o), "group_pool is for padded mode");
  o = grouped_options();
  o.buckets = {4, 8};
  expect_contains(refused(o), "group_pool and buckets");
  o = grouped_options();
  o.auto_buckets = true;
  expect_contains(refused(o), "group_pool and buckets");
  o = grouped_options();
  o.seq_len = 8;
  expect_contains(refused(o), "seq_len = 8");
  o = grouped_options();
  o.group_pool = -1;
  expect_contains(refused(o), "group_pool = -1 must be >= 0");
  // micro_batch_size is only a cap with grouping: 0 is fine.
  o = grouped_options();
  o.micro_batch_size = 0;
  EXPECT_EQ(Batcher(c.dataset, o).num_kept_documents(), 4);
}

}  // namespace
}  // namespace headroom
