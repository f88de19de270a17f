// The dataset tools as library code (data/synth.h, inspect.h, batches.h,
// token_id_list.h), called directly: no `headroom` binary is spawned. The
// CLI around them is tested in tests/cli/data_cli_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "data/batches.h"
#include "data/inspect.h"
#include "data/synth.h"
#include "data/token_id_list.h"
#include "data_test_util.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::RawDataset;
using testing::TempDir;
using testing::usage_error;

TEST(Synth, WritesWhatItReportsAndMakesTheFolder) {
  TempDir dir;
  SynthOptions o;
  o.out = dir.file("new/folder/corpus.h5");
  o.spec.vocab_size = 50;
  o.spec.branching = 4;
  o.spec.seed = 7;
  o.documents = 30;
  o.lengths = LengthSpec::uniform(5, 20);
  const SynthSummary s = synth_markov_dataset(o);

  const TokenDataset written = TokenDataset::open(o.out, 50);
  EXPECT_EQ(s.path, o.out);
  EXPECT_EQ(s.documents, 30);
  EXPECT_EQ(s.documents, written.num_documents());
  EXPECT_EQ(s.tokens, written.num_tokens());
  EXPECT_GE(s.tokens, 30 * 5);
  EXPECT_LE(s.tokens, 30 * 20);
  EXPECT_EQ(s.vocab_size, 50);
  EXPECT_DOUBLE_EQ(s.entropy_rate_nats, MarkovSource(o.spec).entropy_rate_nats());
  ASSERT_TRUE(written.attributes().source_entropy_nats.has_value());
  EXPECT_DOUBLE_EQ(*written.attributes().source_entropy_nats, s.entropy_rate_nats);
}

TEST(Synth, RefusesBadOptionsAndAnExistingFileBeforeWriting) {
  TempDir dir;
  SynthOptions o;
  o.out = dir.file("c.h5");
  o.spec.vocab_size = 0;
  expect_contains(usage_error([&] { synth_markov_dataset(o); }), "--vocab 0: expected 1..");
  o.spec.vocab_size = 16;
  o.spec.branching = 17;
  expect_contains(usage_error([&] { synth_markov_dataset(o); }),
                  "--branching 17: expected 1..--vocab (16)");
  o.spec.branching = 4;
  o.documents = 0;
  expect_contains(usage_error([&] { synth_markov_dataset(o); }), "--documents 0: expected 1..");
  EXPECT_TRUE(dir.listing().empty());

  o.documents = 3;
  o.lengths = LengthSpec::fixed(8);
  synth_markov_dataset(o);
  const auto before = std::filesystem::last_write_time(o.out);
  expect_contains(usage_error([&] { synth_markov_dataset(o); }),
                  o.out + ": exists; pass --overwrite to replace it");
  EXPECT_EQ(std::filesystem::last_write_time(o.out), before);
  o.overwrite = true;
  o.documents = 5;
  EXPECT_EQ(synth_markov_dataset(o).documents, 5);
}

TEST(Inspect, CountsAKnownDataset) {
  TempDir dir;
  // Token t of document d is (d + 3t) % 100 (RawDataset::with_lengths).
  const std::string path = dir.file("known.h5");
  RawDataset::with_lengths({4, 0, 9, 1, 3}).write(path);
  const DatasetInspection r = inspect_dataset(path);
  EXPECT_EQ(r.path, path);
  EXPECT_EQ(r.documents, 5);
  EXPECT_EQ(r.tokens, 17);
  // Sorted lengths 0 1 3 4 9; nearest rank: p50 is the 3rd, p90 the 5th.
  EXPECT_EQ(r.length_percentiles, (std::array<int64_t, 5>{0, 3, 9, 9, 9}));
  EXPECT_DOUBLE_EQ(r.mean_length, 17.0 / 5.0);
  ASSERT_EQ(r.length_histogram.size(), 5u);
  const int64_t bounds[5][2] = {{0, 0}, {1, 1}, {2, 3}, {4, 7}, {8, 15}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.length_histogram[i].min, bounds[i][0]) << i;
    EXPECT_EQ(r.length_histogram[i].max, bounds[i][1]) << i;
    EXPECT_EQ(r.length_histogram[i].documents, 1) << i;
  }
  // Documents 0 (0 3 6 9), 2 (2 5 ... 26), 3 (3), 4 (4 7 10): 15 distinct ids.
  std::set<int> ids;
  for (int t = 0; t < 4; ++t)
    ids.insert(3 * t);
  for (int t = 0; t < 9; ++t)
    ids.insert(2 + 3 * t);
  ids.insert(3);
  for (int t = 0; t < 3; ++t)
    ids.insert(4 + 3 * t);
  EXPECT_EQ(r.vocab_distinct, static_cast<int64_t>(ids.size()));
  EXPECT_DOUBLE_EQ(r.vocab_fraction, static_cast<double>(ids.size()) / 100.0);
  EXPECT_FALSE(r.has_loss_mask);
  EXPECT_EQ(r.targets, 17);
  EXPECT_DOUBLE_EQ(r.coverage, 1.0);
  EXPECT_EQ(r.attributes.vocab_size, 100);
  EXPECT_EQ(r.attributes.tokenizer, "test");
  EXPECT_FALSE(r.attributes.source_entropy_nats.has_value());
  // "auto" over 1 3 4 9: the candidates are 8 (1, 3 and 4 rounded up) and
  // the longest, 9, and two buckets pad least. Rows of 8 hold 1 3 4 (16 of 24
  // tokens padding), rows of 9 hold 9 (none); all of it, 16 of 33.
  EXPECT_EQ(r.suggested_buckets, (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(r.suggested_bucket_documents, (std::vector<int64_t>{3, 1}));
  ASSERT_EQ(r.suggested_bucket_padding_fractions.size(), 2u);
  EXPECT_DOUBLE_EQ(r.suggested_bucket_padding_fractions[0], 1.0 - 8.0 / 24.0);
  EXPECT_DOUBLE_EQ(r.suggested_bucket_padding_fractions[1], 0.0);
  EXPECT_DOUBLE_EQ(r.bucketed_padding_fraction, 1.0 - 17.0 / 33.0);
}

TEST(Inspect, ReportsTheLossMaskAndTheEntropy) {
  TempDir dir;
  const std::string path = dir.file("masked.h5");
  RawDataset raw = RawDataset::with_lengths({2, 6});
  raw.loss_mask = std::vector<uint8_t>{0, 1, 0, 1, 1, 0, 1, 1};
  raw.attributes["source_entropy_nats"] = 1.25;
  raw.write(path);
  const DatasetInspection r = inspect_dataset(path);
  EXPECT_TRUE(r.has_loss_mask);
  EXPECT_EQ(r.targets, 5);
  EXPECT_DOUBLE_EQ(r.coverage, 5.0 / 8.0);
  ASSERT_TRUE(r.attributes.source_entropy_nats.has_value());
  EXPECT_DOUBLE_EQ(*r.attributes.source_entropy_nats, 1.25);
}

TEST(Inspect, NamesTheFileItCannotRead) {
  TempDir dir;
  const std::string path = dir.file("absent.h5");
  expect_contains(usage_error([&] { inspect_dataset(path); }), path);
  const std::string broken = dir.file("broken.h5");
  RawDataset raw = RawDataset::with_lengths({3, 3});
  raw.offsets = {0, 4, 3};
  raw.write(broken);
  expect_contains(usage_error([&] { inspect_dataset(broken); }), broken + ": /offsets");
}

BatchOptions two_rank_options() {
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPacked;
  o.max_tokens_per_micro_batch = 256;
  o.shuffle = false;
  o.world_size = 2;
  o.grad_accum = 1;
  return o;
}

TEST(Batches, ListsWhatTheBatcherPlansStepByStep) {
  TempDir dir;
  const std::string path = dir.file("eight.h5");
  RawDataset::with_lengths(std::vector<int64_t>(8, 100)).write(path);
  const TokenDataset dataset = TokenDataset::open(path, 100);
  const BatchOptions options = two_rank_options();

  Batcher batcher(dataset, options);
  std::vector<StepBatches> steps;
  const BatchListingTotals totals =
      list_batches(batcher, 3, [&](const StepBatches& s) { steps.push_back(s); });

  // Two documents of 100 tokens fill a bin of 256; a step is two bins, one
  // per rank; eight documents are two steps, so step 3 starts epoch 1.
  Batcher reference(dataset, options);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepBatches& s = steps[i];
    EXPECT_EQ(s.step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(s.epoch, i < 2 ? 0 : 1);
    const std::vector<std::vector<MicroBatchPlan>> planned = reference.next_step_plan();
    ASSERT_EQ(s.ranks.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      ASSERT_EQ(s.ranks[r].size(), 1u);
      EXPECT_EQ(s.ranks[r][0].documents, planned[r][0].documents);
      EXPECT_EQ(s.ranks[r][0].documents.size(), 2u);
      EXPECT_EQ(s.rank_tokens[r], 200);
    }
    EXPECT_EQ(s.max_rank_tokens, 200);
    EXPECT_EQ(s.tokens, 400);
  }
  EXPECT_EQ(totals.steps, 3);
  EXPECT_EQ(totals.micro_batches, 6);
  EXPECT_EQ(totals.tokens, 1200);
  EXPECT_EQ(totals.padding, 0);
  EXPECT_DOUBLE_EQ(totals.rank_balance, 1.0);
  EXPECT_EQ(batcher.cursor(), reference.cursor());
}

TEST(Batches, RankBalanceIsTheMeanRankOverTheBusiest) {
  TempDir dir;
  const std::string path = dir.file("uneven.h5");
  // Two bins of one document each (300 > 256): ranks get 200 and 100 tokens.
  RawDataset::with_lengths({200, 100}).write(path);
  const TokenDataset dataset = TokenDataset::open(path, 100);
  Batcher batcher(dataset, two_rank_options());
  int64_t calls = 0;
  const BatchListingTotals totals = list_batches(batcher, 1, [&](const StepBatches& s) {
    ++calls;
    EXPECT_EQ(s.max_rank_tokens, 200);
    EXPECT_EQ(s.tokens, 300);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(totals.rank_balance, 300.0 / 2 / 200.0);
}

TEST(Batches, SumsThePaddingOfEachBucketAndPool) {
  TempDir dir;
  const std::string path = dir.file("mixed.h5");
  std::vector<int64_t> lengths;
  for (int64_t d = 0; d < 40; ++d)
    lengths.push_back(d % 2 ? 10 + d : 100 + 3 * d);
  RawDataset::with_lengths(lengths).write(path);
  const TokenDataset dataset = TokenDataset::open(path, 100);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.max_tokens_per_micro_batch = 512;
  o.world_size = 2;
  for (bool bucketed : {true, false}) {
    if (bucketed)
      o.buckets = {64, 256};
    else
      o.group_pool = 2;
    Batcher batcher(dataset, o);
    int64_t tokens = 0, padding = 0, micro_batches = 0;
    std::set<std::pair<int64_t, int64_t>> seen;
    const BatchListingTotals totals = list_batches(batcher, 12, [&](const StepBatches& s) {
      for (const std::vector<MicroBatchPlan>& rank : s.ranks)
        for (const MicroBatchPlan& b : rank)
          seen.insert(bucketed ? std::pair<int64_t, int64_t>{b.bucket, -1}
                               : std::pair<int64_t, int64_t>{b.epoch, b.pool});
    });
    ASSERT_EQ(totals.groups.size(), seen.size());
    auto key = seen.begin();
    for (const GroupPadding& g : totals.groups) {
      const std::pair<int64_t, int64_t> got =
          bucketed ? std::pair{g.bucket, g.epoch} : std::pair{g.epoch, g.pool};
      EXPECT_EQ(got, *key++) << "in order";
      EXPECT_EQ(bucketed ? g.pool : g.bucket, -1);
      EXPECT_GT(g.micro_batches, 0);
      EXPECT_LE(g.padding, g.tokens);
      EXPECT_DOUBLE_EQ(g.padding_share(), static_cast<double>(g.padding) / g.tokens);
      tokens += g.tokens;
      padding += g.padding;
      micro_batches += g.micro_batches;
    }
    EXPECT_EQ(tokens, totals.tokens);
    EXPECT_EQ(padding, totals.padding);
    EXPECT_EQ(micro_batches, totals.micro_batches);
    EXPECT_GT(totals.padding_share(), 0.0);
    o.buckets.clear();
  }
  // Plain padded and packed listings have no groups.
  o.group_pool = 0;
  o.micro_batch_size = 4;
  Batcher plain(dataset, o);
  EXPECT_TRUE(list_batches(plain, 2, [](const StepBatches&) {}).groups.empty());
}

TEST(TokenIdList, ReadsSpacesCommasAndArrays) {
  EXPECT_EQ(parse_token_id_list("1 2\n3", "f"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_token_id_list(" 4, 5 ,6 ", "f"), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(parse_token_id_list("[7, 8,9]\n", "f"), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(parse_token_id_list("[]", "f"), std::vector<int32_t>{});
  EXPECT_EQ(parse_token_id_list("2147483647", "f"), std::vector<int32_t>{2147483647});
}

TEST(TokenIdList, NamesTheInputAndTheByte) {
  expect_contains(usage_error([] { parse_token_id_list("[72, 101,", "ids.txt"); }),
                  "ids.txt: byte 9: expected a token id, got the end of the input");
  expect_contains(usage_error([] { parse_token_id_list("1 2x 3", "<stdin>"); }),
                  "<stdin>: byte 2: \"2x\" is not a token id");
  expect_contains(usage_error([] { parse_token_id_list("2147483648", "f"); }),
                  "f: byte 0: 2147483648 is not a token id");
  expect_contains(usage_error([] { parse_token_id_list("[1] 2", "f"); }),
                  "expected nothing after the array's ']'");
}

}  // namespace
}  // namespace headroom
