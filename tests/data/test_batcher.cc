// Batcher: the packing rules, padding, the dealing of bins to ranks, their
// invariants as properties over random length distributions and options, and
// exact resumption from a cursor.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "data_test_util.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::TempDir;
using testing::usage_error;

// Token t of document d. The first token is d itself, so a packed segment
// names its document; the rest make every position checkable.
constexpr int64_t kVocab = int64_t{1} << 24;
int32_t token_of(int64_t d, int64_t t) {
  return static_cast<int32_t>((d + 7919 * t) % kVocab);
}
uint8_t mask_of(int64_t d, int64_t t) {
  return (d * 31 + t) % 3 != 0 ? 1 : 0;
}

// A dataset of documents with the given lengths, written to a temp folder.
struct Corpus {
  TempDir dir;
  std::vector<int64_t> lengths;
  bool with_mask = false;
  TokenDataset dataset;

  Corpus(std::vector<int64_t> lengths_in, bool mask)
      : lengths(std::move(lengths_in)), with_mask(mask), dataset(write(dir, lengths, mask)) {}

  static TokenDataset write(const TempDir& dir, const std::vector<int64_t>& lengths, bool mask) {
    return testing::write_corpus(dir, lengths, kVocab, "test_batcher", token_of,
                                 mask ? mask_of : nullptr);
  }

  // `o` with its buckets resolved (Batcher::options()).
  int64_t packed_length(int64_t d, const BatchOptions& o) const {
    int64_t cap = o.max_sample_tokens;
    if (o.mode == BatchOptions::Mode::kPadded && o.seq_len > 0)
      cap = cap > 0 ? std::min(cap, o.seq_len) : o.seq_len;
    if (o.mode == BatchOptions::Mode::kPadded && !o.buckets.empty() && cap > 0)
      cap = std::min(cap, o.buckets.back());
    const int64_t length = lengths[static_cast<size_t>(d)];
    return cap > 0 ? std::min(length, cap) : length;
  }
};

// `width` rounded up to a multiple of m (m = 0: unchanged).
int64_t round_up(int64_t width, int64_t m) {
  return m > 0 ? (width + m - 1) / m * m : width;
}

// Checks one micro-batch against the corpus, from first principles, and
// returns the documents it holds in order.
std::vector<int64_t> check_batch(const Batch& b, const Corpus& c, const BatchOptions& o) {
  std::vector<int64_t> documents;
  const int64_t T = b.size();
  EXPECT_EQ(b.targets.size(), b.tokens.size());
  EXPECT_EQ(b.positions.size(), b.tokens.size());
  EXPECT_GE(b.cu_seqlens.size(), 2u) << "a micro-batch holds at least one document";
  if (b.cu_seqlens.size() < 2 || b.targets.size() != b.tokens.size()) return documents;
  EXPECT_EQ(b.cu_seqlens.front(), 0);
  EXPECT_EQ(b.cu_seqlens.back(), T);
  int64_t counted = 0;
  int64_t longest = 0;
  int64_t truncated = 0;
  const bool padded = o.mode == BatchOptions::Mode::kPadded;
  int64_t padding = 0;
  for (size_t i = 0; i + 1 < b.cu_seqlens.size(); ++i) {
    const int64_t start = b.cu_seqlens[i];
    const int64_t row = b.cu_seqlens[i + 1] - start;
    int64_t length = row;
    EXPECT_GT(length, 0) << "cu_seqlens must increase";
    if (length <= 0) return documents;
    if (!padded && b.padding > 0 && i + 2 == b.cu_seqlens.size()) {
      // A packed bin's padding: the last segment, one of its own.
      EXPECT_GT(o.pad_to_multiple_of, 0) << "packed bins are padded only when asked";
      EXPECT_EQ(row, b.padding);
      for (int64_t t = 0; t < row; ++t) {
        const size_t i_t = static_cast<size_t>(start + t);
        EXPECT_EQ(b.tokens[i_t], o.pad_id);
        EXPECT_EQ(b.targets[i_t], -1) << "padding is never a target";
        EXPECT_EQ(b.positions[i_t], t) << "the padding segment's positions start at 0";
      }
      padding += row;
      break;
    }
    const int64_t d = b.tokens[static_cast<size_t>(start)];
    EXPECT_LT(d, static_cast<int64_t>(c.lengths.size()));
    if (d >= static_cast<int64_t>(c.lengths.size())) return documents;
    documents.push_back(d);
    if (padded) {
      length = c.packed_length(d, o);
      EXPECT_GE(row, length) << "document " << d;
      if (o.seq_len > 0) {
        EXPECT_EQ(row, round_up(o.seq_len, o.pad_to_multiple_of)) << "padded to seq_len";
      }
      for (int64_t t = length; t < row; ++t) {
        const size_t i_t = static_cast<size_t>(start + t);
        EXPECT_EQ(b.tokens[i_t], o.pad_id);
        EXPECT_EQ(b.targets[i_t], -1) << "padding is never a target";
        EXPECT_EQ(b.positions[i_t], t);
      }
      padding += row - length;
    }
    EXPECT_EQ(length, c.packed_length(d, o)) << "document " << d;
    truncated += length < c.lengths[static_cast<size_t>(d)];
    longest = std::max(longest, length);
    for (int64_t t = 0; t < length; ++t) {
      const size_t i_t = static_cast<size_t>(start + t);
      EXPECT_EQ(b.tokens[i_t], token_of(d, t));
      EXPECT_EQ(b.positions[i_t], t);
      int32_t target = -1;  // the last token of a document predicts nothing
      if (t + 1 < length && (!c.with_mask || mask_of(d, t + 1))) target = token_of(d, t + 1);
      EXPECT_EQ(b.targets[i_t], target) << "document " << d << " position " << t;
      counted += target != -1;
    }
  }
  EXPECT_EQ(b.counted, counted);
  EXPECT_EQ(b.longest, longest);
  EXPECT_EQ(b.truncated, truncated);
  EXPECT_EQ(b.padding, padding);
  if (padded) {
    if (o.micro_batch_size > 0) {
      EXPECT_LE(static_cast<int64_t>(documents.size()), o.micro_batch_size);
    }
    if (!o.buckets.empty() && o.pad_to == BatchOptions::PadTo::kBucket) {
      const int64_t bucket = bucket_of(o.buckets, longest);
      EXPECT_GE(bucket, 0);
      if (bucket >= 0) {
        const int64_t width =
            round_up(o.buckets[static_cast<size_t>(bucket)], o.pad_to_multiple_of);
        EXPECT_EQ(T, static_cast<int64_t>(documents.size()) * width)
            << "rows are padded to the bucket";
      }
    } else if (o.seq_len == 0) {
      EXPECT_EQ(T, static_cast<int64_t>(documents.size()) * round_up(longest, o.pad_to_multiple_of))
          << "rows are padded to the longest";
    }
    return documents;
  }
  // Packed: the documents' tokens, padded (when asked) to a multiple of
  // pad_to_multiple_of but never past the budget or, alone and oversize,
  // past themselves.
  const int64_t budget = o.max_tokens_per_micro_batch;
  const int64_t real = T - b.padding;
  const int64_t m = o.pad_to_multiple_of;
  const int64_t want = m > 0 ? std::min((real + m - 1) / m * m, std::max(real, budget)) : real;
  EXPECT_EQ(T, want) << real << " tokens of documents, pad_to_multiple_of " << m << ", budget "
                     << budget;
  const bool alone_and_oversize = documents.size() == 1 && real > budget;
  EXPECT_TRUE(T <= budget || alone_and_oversize)
      << T << " tokens in " << documents.size() << " documents over a budget of " << budget;
  return documents;
}

void expect_same_batch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.cu_seqlens, b.cu_seqlens);
  EXPECT_EQ(a.counted, b.counted);
  EXPECT_EQ(a.longest, b.longest);
  EXPECT_EQ(a.truncated, b.truncated);
}

// The obvious first fit, to check the tree-based one against.
std::vector<int64_t> first_fit_by_scanning(const std::vector<int64_t>& lengths, int64_t budget,
                                           int64_t max_documents) {
  std::vector<int64_t> bin_of;
  std::vector<int64_t> tokens, documents;
  for (int64_t length : lengths) {
    size_t bin = 0;
    while (bin < tokens.size() && (tokens[bin] + length > budget ||
                                   (max_documents > 0 && documents[bin] == max_documents)))
      ++bin;
    if (bin == tokens.size()) {
      tokens.push_back(0);
      documents.push_back(0);
    }
    tokens[bin] += length;
    documents[bin] += 1;
    bin_of.push_back(static_cast<int64_t>(bin));
  }
  return bin_of;
}

TEST(NextFit, ClosesTheOpenBinWhenTheNextDocumentDoesNotFit) {
  const std::vector<int64_t> lengths = {3, 4, 5, 20, 2, 2, 9, 1, 10};
  // [3 4] [5] [20] alone and oversize, [2 2] [9 1] full to the budget, [10]
  EXPECT_EQ(next_fit(lengths, 10), (std::vector<int64_t>{0, 0, 1, 2, 3, 3, 4, 4, 5}));
  EXPECT_TRUE(next_fit(std::vector<int64_t>{}, 10).empty());
  EXPECT_EQ(next_fit(std::vector<int64_t>{7, 7}, 1), (std::vector<int64_t>{0, 1}));
  // At most two documents per bin (batch.micro_batch_size = 2).
  EXPECT_EQ(next_fit(std::vector<int64_t>{1, 1, 1, 1, 1}, 10, 2),
            (std::vector<int64_t>{0, 0, 1, 1, 2}));
}

TEST(FirstFit, GoesBackToTheFirstBinWithRoom) {
  const std::vector<int64_t> lengths = {3, 4, 5, 20, 2, 2, 9, 1, 10};
  // 3+4 → bin 0; 5 → bin 1; 20 → bin 2 (oversize, closed); 2 → bin 0 (9);
  // 2 → bin 1 (7); 9 → bin 3; 1 → bin 0 (10); 10 → bin 4
  EXPECT_EQ(first_fit(lengths, 10), (std::vector<int64_t>{0, 0, 1, 2, 0, 1, 3, 0, 4}));
  EXPECT_EQ(first_fit(std::vector<int64_t>{1, 1, 1, 1, 1}, 10, 2),
            (std::vector<int64_t>{0, 0, 1, 1, 2}));
}

TEST(FirstFit, AgreesWithScanningOnRandomLengths) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t budget = 1 + static_cast<int64_t>(rng() % 300);
    const int64_t cap = rng() % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 6) : 0;
    std::vector<int64_t> lengths(rng() % 500);
    for (int64_t& l : lengths)
      l = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rng() % 2 ? budget : 2 * budget));
    ASSERT_EQ(first_fit(lengths, budget, cap), first_fit_by_scanning(lengths, budget, cap))
        << "trial " << trial;
  }
}

TEST(DealByCost, EveryRankGetsItsShareAndTheLoadsStayWithinOneBin) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int world = 1 + static_cast<int>(rng() % 8);
    const int accum = 1 + static_cast<int>(rng() % 6);
    std::vector<int64_t> costs(static_cast<size_t>(world * accum));
    for (int64_t& c : costs)
      c = rng() % 5 == 0 ? 20000 + static_cast<int64_t>(rng() % 5000)
                         : 1 + static_cast<int64_t>(rng() % 8000);
    const std::vector<std::vector<int64_t>> dealt = deal_by_cost(costs, world);
    ASSERT_EQ(dealt.size(), static_cast<size_t>(world));
    std::vector<int64_t> seen;
    std::vector<int64_t> load;
    for (const std::vector<int64_t>& rank : dealt) {
      ASSERT_EQ(rank.size(), static_cast<size_t>(accum)) << "grad_accum micro-batches per rank";
      int64_t sum = 0;
      for (int64_t j : rank) {
        seen.push_back(j);
        sum += costs[static_cast<size_t>(j)];
      }
      load.push_back(sum);
    }
    std::sort(seen.begin(), seen.end());
    for (size_t j = 0; j < seen.size(); ++j)
      ASSERT_EQ(seen[j], static_cast<int64_t>(j)) << "every bin dealt exactly once";
    const int64_t max_cost = *std::max_element(costs.begin(), costs.end());
    const auto [lightest, heaviest] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*heaviest - *lightest, max_cost) << "trial " << trial;
    // Round k holds the k-th micro-batch of every rank: all of round k cost
    // at least as much as any of round k + 1.
    for (int k = 0; k + 1 < accum; ++k)
      for (int r = 0; r < world; ++r)
        for (int q = 0; q < world; ++q)
          EXPECT_GE(costs[static_cast<size_t>(dealt[r][k])],
                    costs[static_cast<size_t>(dealt[q][k + 1])]);
  }
}

TEST(DealByCost, SeedOnesLongSampleIsNotStackedOnOneRank) {
  // Two ranks, two micro-batches each: a 24k bin, three 8k bins. Round-robin
  // in stream order could give one rank 24k + 8k; cost dealing gives the 24k
  // rank the smallest of the rest.
  const std::vector<int64_t> costs = {8000, 24000, 8100, 7900};
  const std::vector<std::vector<int64_t>> dealt = deal_by_cost(costs, 2);
  EXPECT_EQ(dealt[0], (std::vector<int64_t>{1, 3}));  // 24000 + 7900
  EXPECT_EQ(dealt[1], (std::vector<int64_t>{2, 0}));  // 8100 + 8000
}

TEST(Batcher, OversizeDocumentsGetABinOfTheirOwnAndTruncationIsCounted) {
  Corpus c({5, 30, 5, 5, 12}, false);
  BatchOptions o;
  o.max_tokens_per_micro_batch = 10;
  o.shuffle = false;
  o.packing = BatchOptions::Packing::kNextFit;
  Batcher batcher(c.dataset, o);
  EXPECT_EQ(batcher.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0}, {1}, {2, 3}, {4}}));
  std::vector<Batch> step = batcher.next_step();
  ASSERT_EQ(step.size(), 1u);
  step = batcher.next_step();
  EXPECT_EQ(step[0].size(), 30) << "the 30-token document is neither split nor dropped";
  EXPECT_EQ(step[0].truncated, 0);

  o.packing = BatchOptions::Packing::kFirstFit;  // the 5 at 2 joins the 5 at 0
  EXPECT_EQ(Batcher(c.dataset, o).epoch_bins(0),
            (std::vector<std::vector<int64_t>>{{0, 2}, {1}, {3}, {4}}));

  o.max_sample_tokens = 8;  // now every document fits; the 30 and the 12 are cut to 8
  o.packing = BatchOptions::Packing::kNextFit;
  Batcher capped(c.dataset, o);
  EXPECT_EQ(capped.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0}, {1}, {2, 3}, {4}}));
  capped.next_step();
  Batch cut = capped.next_step()[0];
  EXPECT_EQ(cut.size(), 8);
  EXPECT_EQ(cut.truncated, 1);
  EXPECT_EQ(cut.targets.back(), -1) << "a truncated document's last token predicts nothing";
  check_batch(cut, c, o);
}

TEST(Batcher, PackedBinsArePaddedToAMultipleWithASegmentOfTheirOwn) {
  Corpus c({5, 30, 5, 5, 12}, false);
  BatchOptions o;
  o.max_tokens_per_micro_batch = 16;
  o.shuffle = false;
  o.packing = BatchOptions::Packing::kNextFit;
  o.pad_to_multiple_of = 8;
  o.pad_id = 3;
  Batcher batcher(c.dataset, o);
  // The same bins as unpadded: padding is added after packing.
  EXPECT_EQ(batcher.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0}, {1}, {2, 3}, {4}}));
  std::vector<int64_t> tokens, padding;
  for (int step = 0; step < 4; ++step) {
    const Batch b = batcher.next_step()[0];
    check_batch(b, c, o);
    tokens.push_back(b.size());
    padding.push_back(b.padding);
    if (step == 2) {
      EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 5, 10, 16}))
          << "the padding is a segment of its own after the documents";
      EXPECT_EQ(b.counted, 8) << "padding adds no target";
      EXPECT_EQ(b.longest, 5) << "padding is not a document";
    }
  }
  // 5 -> 8; 30, alone over the budget, is not padded; 10 -> 16; 12 -> 16.
  EXPECT_EQ(tokens, (std::vector<int64_t>{8, 30, 16, 16}));
  EXPECT_EQ(padding, (std::vector<int64_t>{3, 0, 6, 4}));

  // Never past the budget: with 10 tokens, 5 -> 8, a full 10 stays 10, and
  // the 12 alone over the budget stays 12.
  o.max_tokens_per_micro_batch = 10;
  Batcher capped(c.dataset, o);
  tokens.clear();
  for (int step = 0; step < 4; ++step) {
    const Batch b = capped.next_step()[0];
    check_batch(b, c, o);
    tokens.push_back(b.size());
  }
  EXPECT_EQ(tokens, (std::vector<int64_t>{8, 30, 10, 12}));

  // What is planned is what is built.
  Batcher planner(c.dataset, o);
  const MicroBatchPlan mb = planner.next_step_plan()[0][0];
  EXPECT_EQ(mb.tokens, 8);
  EXPECT_EQ(mb.padding, 3);
}

TEST(Batcher, PaddedRowsAreRoundedUpToAMultipleAsHuggingFaceDoes) {
  Corpus c({5, 9, 3, 17, 4, 2}, false);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.micro_batch_size = 2;
  o.shuffle = false;
  o.pad_to_multiple_of = 8;
  auto widths = [&c](const BatchOptions& options) {
    Batcher batcher(c.dataset, options);
    std::vector<int64_t> width;
    for (int step = 0; step < 3; ++step) {
      const Batch b = batcher.next_step()[0];
      check_batch(b, c, options);
      width.push_back(b.size() / (static_cast<int64_t>(b.cu_seqlens.size()) - 1));
    }
    return width;
  };
  // The longest row of each micro-batch (9, 17, 4) rounded up.
  EXPECT_EQ(widths(o), (std::vector<int64_t>{16, 24, 8}));
  // seq_len truncates at 12 as before; rows are then 16 long.
  o.seq_len = 12;
  EXPECT_EQ(widths(o), (std::vector<int64_t>{16, 16, 16}));
  // Buckets: rows padded to the bucket's boundary (6 -> 8, 20 -> 24), and
  // the rows per micro-batch come from the rounded boundary: 24 / 8 = 3 in
  // the short bucket, 24 / 24 = 1 in the long one.
  o.seq_len = 0;
  o.micro_batch_size = 0;
  o.buckets = {6, 20};
  o.max_tokens_per_micro_batch = 24;
  Batcher bucketed(c.dataset, o);
  EXPECT_EQ(bucketed.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0, 2, 4}, {1}, {5}, {3}}));
  const MicroBatchPlan first = bucketed.next_step_plan()[0][0];
  EXPECT_EQ(first.tokens, 24);
  EXPECT_EQ(first.width, 8);
  EXPECT_EQ(first.padding, 24 - (5 + 3 + 4));
}

TEST(Batcher, FirstFitDecreasingSortsEachWindowLongestFirst) {
  Corpus c({2, 9, 4, 7, 1, 6, 8, 3}, false);
  BatchOptions o;
  o.max_tokens_per_micro_batch = 10;
  o.shuffle = false;
  o.packing = BatchOptions::Packing::kFirstFitDecreasing;
  o.packing_window = 4;
  // Window {2 9 4 7} sorted: 9 7 4 2 → [9] [7 2] [4]... first fit: 9→b0,
  // 7→b1, 4→b2, 2→b1 (7+2). Window {1 6 8 3} sorted: 8 6 3 1 → [8 1] [6 3].
  EXPECT_EQ(Batcher(c.dataset, o).epoch_bins(0),
            (std::vector<std::vector<int64_t>>{{1}, {3, 0}, {2}, {6, 4}, {5, 7}}));
  o.packing_window = 0;  // the whole epoch: 9 8 7 6 4 3 2 1
  EXPECT_EQ(Batcher(c.dataset, o).epoch_bins(0),
            (std::vector<std::vector<int64_t>>{{1, 4}, {6, 0}, {3, 7}, {5, 2}}));
}

TEST(Batcher, PaddedRowsArePaddedToTheLongestOrToSeqLen) {
  Corpus c({5, 3, 8, 2, 4}, true);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.micro_batch_size = 2;
  o.shuffle = false;
  o.pad_id = 77;
  Batcher batcher(c.dataset, o);
  EXPECT_EQ(batcher.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
  Batch b = batcher.next_step()[0];
  EXPECT_EQ(b.size(), 10);
  EXPECT_EQ(b.padding, 2);
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 5, 10}));
  check_batch(b, c, o);
  b = batcher.next_step()[0];
  EXPECT_EQ(b.size(), 16);
  EXPECT_EQ(b.padding, 6);
  check_batch(b, c, o);
  b = batcher.next_step()[0];
  EXPECT_EQ(b.size(), 4) << "the epoch's last micro-batch has the rows that are left";
  EXPECT_EQ(b.padding, 0);

  o.seq_len = 4;  // every row 4 tokens: the 5 and the 8 are cut, the others padded
  Batcher fixed(c.dataset, o);
  b = fixed.next_step()[0];
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 4, 8}));
  EXPECT_EQ(b.truncated, 1);
  EXPECT_EQ(b.padding, 1);
  check_batch(b, c, o);
}

// Options drawn at random; lengths from one of several shapes.
struct Trial {
  BatchOptions options;
  std::vector<int64_t> lengths;
  int shape = 0;
};

Trial random_trial(std::mt19937_64& rng) {
  auto below = [&rng](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  Trial t;
  BatchOptions& o = t.options;
  o.mode = below(4) == 0 ? BatchOptions::Mode::kPadded : BatchOptions::Mode::kPacked;
  o.packing = static_cast<BatchOptions::Packing>(below(3));
  o.packing_window = below(2) ? 0 : 1 + below(40);
  o.max_tokens_per_micro_batch = 1 + below(200);
  o.grad_accum = 1 + static_cast<int>(below(4));
  o.world_size = 1 + static_cast<int>(below(4));
  // At least 2: a corpus cut to 1 token a document has no target, and the
  // Batcher refuses it (check_trainable) before any property could hold.
  o.max_sample_tokens = below(2) ? 0 : 2 + below(150);
  if (o.mode == BatchOptions::Mode::kPadded) {
    o.micro_batch_size = 1 + below(6);
    o.seq_len = below(2) ? 0 : 2 + below(100);
    o.pad_id = static_cast<int32_t>(below(100));
  } else {
    o.micro_batch_size = below(3) == 0 ? 1 + below(5) : 0;
  }
  o.shuffle = below(4) != 0;
  o.seed = rng();
  const int64_t budget = o.max_tokens_per_micro_batch;
  const int64_t n = 1 + below(300);
  t.shape = static_cast<int>(below(5));
  for (int64_t d = 0; d < n; ++d) {
    switch (t.shape) {
      case 0:  // short documents, many per bin
        t.lengths.push_back(1 + below(50));
        break;
      case 1:  // heavy tail: mostly short, some far over the budget
        t.lengths.push_back(below(10) == 0 ? budget + below(4 * budget) : 1 + below(budget));
        break;
      case 2:  // everything oversize
        t.lengths.push_back(budget + 1 + below(100));
        break;
      case 3:  // empty and one-token documents mixed in
        t.lengths.push_back(below(3) == 0 ? 0 : below(3) == 0 ? 1 : below(2 * budget));
        break;
      default:  // exactly the budget
        t.lengths.push_back(budget);
        break;
    }
  }
  if (std::all_of(t.lengths.begin(), t.lengths.end(), [](int64_t l) { return l == 0; }))
    t.lengths[0] = 1;
  // Drawn last, so the draws above are those of the trials before bins
  // and rows could be padded to a multiple.
  if (below(3) == 0) {
    o.pad_to_multiple_of = 1 + below(64);
    o.pad_id = static_cast<int32_t>(below(100));
  }
  return t;
}

TEST(Batcher, PropertiesOverRandomCorporaAndOptions) {
  std::mt19937_64 rng(20260905);
  for (int trial = 0; trial < 60; ++trial) {
    const Trial t = random_trial(rng);
    const BatchOptions& o = t.options;
    const bool padded = o.mode == BatchOptions::Mode::kPadded;
    const int64_t budget = o.max_tokens_per_micro_batch;
    const int64_t n = static_cast<int64_t>(t.lengths.size());
    Corpus c(t.lengths, trial % 2 == 0);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + (padded ? "padded" : "packed") +
                 ", packing " + std::to_string(static_cast<int>(o.packing)) + ", window " +
                 std::to_string(o.packing_window) + ", budget " + std::to_string(budget) +
                 ", grad_accum " + std::to_string(o.grad_accum) + ", world_size " +
                 std::to_string(o.world_size) + ", max_sample_tokens " +
                 std::to_string(o.max_sample_tokens) + ", micro_batch_size " +
                 std::to_string(o.micro_batch_size) + ", seq_len " + std::to_string(o.seq_len) +
                 ", pad_to_multiple_of " + std::to_string(o.pad_to_multiple_of) + ", shape " +
                 std::to_string(t.shape) + ", documents " + std::to_string(n));

    std::vector<Batcher> ranks;
    for (int r = 0; r < o.world_size; ++r) {
      BatchOptions mine = o;
      mine.rank = r;
      ranks.emplace_back(c.dataset, mine);
    }
    Batcher planner(c.dataset, o);
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < n; ++d)
      if (t.lengths[static_cast<size_t>(d)] > 0) kept.push_back(d);
    ASSERT_EQ(ranks[0].num_kept_documents(), static_cast<int64_t>(kept.size()));

    const int epochs = 3;
    std::vector<std::vector<std::vector<int64_t>>> plans;
    int64_t planned_bins = 0;
    for (int e = 0; e < epochs; ++e) {
      plans.push_back(ranks[0].epoch_bins(e));
      planned_bins += static_cast<int64_t>(plans.back().size());
      EXPECT_EQ(plans.back(), ranks[o.world_size - 1].epoch_bins(e)) << "ranks disagree";
    }
    // The stream of bins, epoch after epoch, as (epoch, bin).
    std::vector<std::pair<int64_t, int64_t>> stream;
    for (int e = 0; e < epochs; ++e)
      for (size_t b = 0; b < plans[static_cast<size_t>(e)].size(); ++b)
        stream.emplace_back(e, static_cast<int64_t>(b));
    const size_t per_step = static_cast<size_t>(o.world_size) * o.grad_accum;
    for (size_t consumed = 0; consumed + per_step <= stream.size(); consumed += per_step) {
      const std::vector<std::vector<MicroBatchPlan>> plan = planner.next_step_plan();
      std::vector<std::pair<int64_t, int64_t>> step_bins;
      std::vector<int64_t> rank_tokens;
      for (int r = 0; r < o.world_size; ++r) {
        const std::vector<Batch> got = ranks[static_cast<size_t>(r)].next_step();
        const std::vector<MicroBatchPlan>& mine = plan[static_cast<size_t>(r)];
        ASSERT_EQ(got.size(), static_cast<size_t>(o.grad_accum))
            << "every rank gets grad_accum micro-batches per step";
        ASSERT_EQ(mine.size(), got.size());
        int64_t tokens = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const std::vector<int64_t> documents = check_batch(got[i], c, o);
          EXPECT_EQ(documents, mine[i].documents) << "rank " << r << " built what was planned";
          EXPECT_EQ(documents,
                    plans[static_cast<size_t>(mine[i].epoch)][static_cast<size_t>(mine[i].bin)]);
          EXPECT_EQ(got[i].size(), mine[i].tokens);
          EXPECT_EQ(got[i].padding, mine[i].padding);
          tokens += got[i].size();
          step_bins.emplace_back(mine[i].epoch, mine[i].bin);
        }
        rank_tokens.push_back(tokens);
      }
      if (::testing::Test::HasFailure()) return;
      // The step trained on exactly the next world_size * grad_accum bins.
      std::sort(step_bins.begin(), step_bins.end());
      EXPECT_TRUE(std::equal(step_bins.begin(), step_bins.end(),
                             stream.begin() + static_cast<std::ptrdiff_t>(consumed)));
      int64_t largest = 0;
      for (const std::vector<MicroBatchPlan>& rank : plan)
        for (const MicroBatchPlan& mb : rank)
          largest = std::max(largest, mb.tokens);
      const auto [lightest, heaviest] = std::minmax_element(rank_tokens.begin(), rank_tokens.end());
      EXPECT_LE(*heaviest - *lightest, largest) << "ranks balanced within one micro-batch";
    }
    for (Batcher& rank : ranks)
      EXPECT_EQ(rank.cursor(), planner.cursor());

    std::vector<std::vector<int64_t>> orders;
    for (int e = 0; e < epochs; ++e) {
      const std::vector<std::vector<int64_t>>& plan = plans[static_cast<size_t>(e)];
      std::vector<int64_t> order;
      for (size_t b = 0; b < plan.size(); ++b) {
        const std::vector<int64_t>& bin = plan[b];
        order.insert(order.end(), bin.begin(), bin.end());
        const int64_t cap = o.micro_batch_size;
        if (cap > 0) {
          EXPECT_LE(static_cast<int64_t>(bin.size()), cap) << "epoch " << e << " bin " << b;
        }
        if (padded) {
          if (b + 1 < plan.size()) {
            EXPECT_EQ(static_cast<int64_t>(bin.size()), cap) << "only the last bin is short";
          }
          continue;
        }
        int64_t tokens = 0;
        for (int64_t d : bin)
          tokens += c.packed_length(d, o);
        EXPECT_TRUE(tokens <= budget || bin.size() == 1) << "epoch " << e << " bin " << b;
        // Next fit closes a bin only because the next document did not fit
        // (or it holds as many documents as allowed) or its window ended.
        if (o.packing == BatchOptions::Packing::kNextFit && o.packing_window == 0 &&
            b + 1 < plan.size() && (cap == 0 || static_cast<int64_t>(bin.size()) < cap)) {
          EXPECT_GT(tokens + c.packed_length(plan[b + 1].front(), o), budget)
              << "epoch " << e << " bin " << b << " closed with room for the next document";
        }
        // Without shuffle, windows are runs of kept documents: a bin never
        // mixes two.
        if (!o.shuffle && o.packing_window > 0) {
          auto window_of = [&](int64_t d) {
            return (std::lower_bound(kept.begin(), kept.end(), d) - kept.begin()) /
                   o.packing_window;
          };
          for (int64_t d : bin)
            EXPECT_EQ(window_of(d), window_of(bin.front())) << "epoch " << e << " bin " << b;
        }
      }
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, kept) << "epoch " << e << ": not every document exactly once";
      if (!o.shuffle && (padded || o.packing == BatchOptions::Packing::kNextFit)) {
        EXPECT_EQ(order, kept) << "without shuffle, file order";
      }
      orders.push_back(order);
    }
    if (o.shuffle && kept.size() >= 10) {
      EXPECT_NE(orders[0], orders[1]) << "each epoch has its own permutation";
    }
  }
}

TEST(Batcher, AStepHoldsTheSameBinsWhateverTheWorldSize) {
  std::vector<int64_t> lengths;
  for (int d = 0; d < 300; ++d)
    lengths.push_back(1 + (d * 7919) % 400);
  Corpus c(lengths, false);
  auto step_documents = [&c](int world, int accum) {
    BatchOptions o;
    o.max_tokens_per_micro_batch = 512;
    o.world_size = world;
    o.grad_accum = accum;
    Batcher batcher(c.dataset, o);
    std::vector<std::vector<int64_t>> steps;
    for (int step = 0; step < 6; ++step) {
      std::vector<int64_t> documents;
      for (const std::vector<MicroBatchPlan>& rank : batcher.next_step_plan())
        for (const MicroBatchPlan& mb : rank)
          documents.insert(documents.end(), mb.documents.begin(), mb.documents.end());
      std::sort(documents.begin(), documents.end());
      steps.push_back(documents);
    }
    return steps;
  };
  const auto one = step_documents(1, 4);
  EXPECT_EQ(step_documents(2, 2), one);
  EXPECT_EQ(step_documents(4, 1), one);
}

TEST(Batcher, ShuffleIsDeterministicBySeed) {
  std::vector<int64_t> lengths;
  for (int d = 0; d < 200; ++d)
    lengths.push_back(1 + (d * 37) % 90);
  Corpus c(lengths, false);
  BatchOptions o;
  o.max_tokens_per_micro_batch = 128;
  o.seed = 5;
  Batcher a(c.dataset, o);
  Batcher b(c.dataset, o);
  o.seed = 6;
  Batcher other(c.dataset, o);
  EXPECT_EQ(a.epoch_bins(3), b.epoch_bins(3));
  EXPECT_NE(a.epoch_bins(0), other.epoch_bins(0));
  for (int step = 0; step < 5; ++step)
    expect_same_batch(a.next_step()[0], b.next_step()[0]);
}

TEST(Batcher, ResumingFromACursorGivesTheIdenticalSequence) {
  std::vector<int64_t> lengths;
  for (int d = 0; d < 60; ++d)
    lengths.push_back(d % 7 == 0 ? 0 : 1 + (d * 53) % 120);
  Corpus c(lengths, true);
  for (int rank = 0; rank < 2; ++rank) {
    for (BatchOptions::Mode mode : {BatchOptions::Mode::kPacked, BatchOptions::Mode::kPadded}) {
      BatchOptions o;
      o.mode = mode;
      o.micro_batch_size = mode == BatchOptions::Mode::kPadded ? 3 : 0;
      o.max_tokens_per_micro_batch = 100;
      o.grad_accum = 3;
      o.world_size = 2;
      o.rank = rank;
      o.max_sample_tokens = 90;
      Batcher original(c.dataset, o);
      const int64_t bins_per_epoch = static_cast<int64_t>(original.epoch_bins(0).size());
      for (int step = 0; step < 5; ++step)
        original.next_step();
      const Cursor saved = original.cursor();
      EXPECT_LT(saved.position, static_cast<int64_t>(original.epoch_bins(saved.epoch).size()));
      std::vector<std::vector<Batch>> expected;
      Cursor before_last;
      // Long enough to cross at least two epoch boundaries.
      const int steps = static_cast<int>(3 * bins_per_epoch / 6) + 2;
      for (int step = 0; step < steps; ++step) {
        before_last = original.cursor();
        expected.push_back(original.next_step());
      }
      EXPECT_GE(original.cursor().epoch, saved.epoch + 2);

      Batcher resumed(c.dataset, o);
      resumed.set_cursor(saved);
      EXPECT_EQ(resumed.cursor(), saved);
      for (int step = 0; step < steps; ++step) {
        std::vector<Batch> got = resumed.next_step();
        ASSERT_EQ(got.size(), expected[static_cast<size_t>(step)].size());
        for (size_t i = 0; i < got.size(); ++i)
          expect_same_batch(got[i], expected[static_cast<size_t>(step)][i]);
      }
      EXPECT_EQ(resumed.cursor(), original.cursor());
      // Resuming into the middle of a later epoch works too.
      Batcher late(c.dataset, o);
      late.set_cursor(before_last);
      std::vector<Batch> last = late.next_step();
      for (size_t i = 0; i < last.size(); ++i)
        expect_same_batch(last[i], expected.back()[i]);
    }
  }
}

TEST(Batcher, AStepCanSpanSeveralEpochs) {
  Corpus c({3, 4, 2}, false);  // one bin per epoch
  BatchOptions o;
  o.max_tokens_per_micro_batch = 64;
  o.grad_accum = 2;
  o.world_size = 3;
  o.rank = 2;
  Batcher batcher(c.dataset, o);
  std::vector<Batch> step = batcher.next_step();
  ASSERT_EQ(step.size(), 2u);
  for (const Batch& b : step)
    EXPECT_EQ(b.size(), 9);
  EXPECT_EQ(batcher.cursor(), (Cursor{6, 0}));
}

TEST(Batcher, RefusesImpossibleOptionsAndCursors) {
  Corpus c({3, 4, 2, 9}, false);
  auto make = [&c](BatchOptions o) { Batcher batcher(c.dataset, o); };
  BatchOptions o;
  o.max_tokens_per_micro_batch = 0;
  expect_contains(usage_error([&] { make(o); }),
                  "corpus.h5: batching: max_tokens_per_micro_batch = 0");
  o = BatchOptions{};
  o.grad_accum = 0;
  expect_contains(usage_error([&] { make(o); }), "grad_accum = 0 must be >= 1");
  o = BatchOptions{};
  o.world_size = 2;
  o.rank = 2;
  expect_contains(usage_error([&] { make(o); }), "rank 2 of world_size 2 is not a rank");
  o = BatchOptions{};
  o.max_sample_tokens = -1;
  expect_contains(usage_error([&] { make(o); }), "max_sample_tokens = -1");
  o = BatchOptions{};
  o.micro_batch_size = -1;
  expect_contains(usage_error([&] { make(o); }), "micro_batch_size = -1");
  o = BatchOptions{};
  o.mode = BatchOptions::Mode::kPadded;
  expect_contains(usage_error([&] { make(o); }),
                  "micro_batch_size = 0 must be >= 1 in padded mode");
  o = BatchOptions{};
  o.packing_window = -3;
  expect_contains(usage_error([&] { make(o); }), "packing_window = -3");
  o = BatchOptions{};
  o.pad_to_multiple_of = -8;
  expect_contains(usage_error([&] { make(o); }),
                  "pad_to_multiple_of = -8 must be in [0, 2^31) (0 = no padding)");

  Batcher batcher(c.dataset, BatchOptions{});
  expect_contains(usage_error([&] {
                    batcher.set_cursor(Cursor{0, 1});
                  }),
                  "data cursor (epoch 0, position 1) is past the 1 micro-batches of that epoch");
  expect_contains(usage_error([&] { batcher.set_cursor(Cursor{-1, 0}); }), "is negative");
  EXPECT_EQ(batcher.cursor(), (Cursor{0, 0})) << "a refused cursor changes nothing";

  Corpus empty({0, 0}, false);
  expect_contains(usage_error([&] { Batcher(empty.dataset, BatchOptions{}); }),
                  "corpus.h5: all 2 documents are empty");
}

// --- length buckets (batch.buckets) -----------------------------------------------

// Padded tokens of `lengths` in rows padded to their bucket of `boundaries`
// (whose last holds the longest).
int64_t padded_tokens_in(std::span<const int64_t> boundaries, std::span<const int64_t> lengths) {
  int64_t padded = 0;
  for (int64_t length : lengths)
    if (length > 0) padded += boundaries[static_cast<size_t>(bucket_of(boundaries, length))];
  return padded;
}

TEST(Buckets, AutoBoundariesAreTheLeastPaddingFiveAmongRoundedLengths) {
  // Every subset of at most five of the distinct lengths that ends at the
  // longest, searched by brute force: the chosen boundaries pad no more than
  // the best of them, whatever the mix.
  std::mt19937_64 rng(45);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int64_t> lengths;
    const int distinct = 1 + static_cast<int>(rng() % 12);
    std::vector<int64_t> values;
    for (int v = 0; v < distinct; ++v)
      values.push_back(8 * static_cast<int64_t>(1 + rng() % 200));  // multiples of 8: no rounding
    for (int d = 0; d < 50; ++d)
      lengths.push_back(values[rng() % values.size()]);
    lengths.push_back(0);
    std::vector<int64_t> sorted = lengths;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    sorted.erase(sorted.begin());  // the 0
    const size_t m = sorted.size();
    int64_t best = std::numeric_limits<int64_t>::max();
    for (uint32_t mask = 0; mask < (1u << (m - 1)); ++mask) {
      if (std::popcount(mask) > static_cast<int>(kAutoBuckets) - 1) continue;
      std::vector<int64_t> subset;
      for (size_t i = 0; i + 1 < m; ++i)
        if (mask & (1u << i)) subset.push_back(sorted[i]);
      subset.push_back(sorted.back());
      best = std::min(best, padded_tokens_in(subset, lengths));
    }
    const std::vector<int64_t> chosen = auto_bucket_boundaries(lengths);
    ASSERT_FALSE(chosen.empty());
    EXPECT_LE(chosen.size(), static_cast<size_t>(kAutoBuckets));
    EXPECT_TRUE(std::is_sorted(chosen.begin(), chosen.end()));
    EXPECT_EQ(chosen.back(), sorted.back());
    EXPECT_EQ(padded_tokens_in(chosen, lengths), best) << "trial " << trial;
  }
}

TEST(Buckets, AutoBoundariesAreRoundedUpToEightButNotPastTheLongest) {
  // Uniform 1..1000: the least padding in five buckets cuts at 200, 400,
  // 600, 800 and 1000, each a multiple of 8 already; candidates are the
  // 256-quantiles rounded up to 8.
  std::vector<int64_t> lengths;
  for (int64_t l = 1; l <= 1000; ++l)
    lengths.push_back(l);
  lengths.push_back(0);  // empty documents are not batched and do not count
  const std::vector<int64_t> uniform = auto_bucket_boundaries(lengths);
  ASSERT_EQ(uniform.size(), 5u);
  EXPECT_EQ(uniform.back(), 1000);
  for (size_t b = 0; b + 1 < uniform.size(); ++b) {
    EXPECT_EQ(uniform[b] % 8, 0);
    EXPECT_NEAR(static_cast<double>(uniform[b]), 200.0 * static_cast<double>(b + 1), 16.0);
  }
  // One length: one bucket. Rounding never passes the longest.
  EXPECT_EQ(auto_bucket_boundaries(std::vector<int64_t>{5, 5, 5, 3}), (std::vector<int64_t>{5}));
  EXPECT_EQ(auto_bucket_boundaries(std::vector<int64_t>{10, 10, 10, 10, 100}),
            (std::vector<int64_t>{16, 100}));
  EXPECT_TRUE(auto_bucket_boundaries(std::vector<int64_t>{0, 0}).empty());
  EXPECT_TRUE(auto_bucket_boundaries(std::vector<int64_t>{}).empty());
}

TEST(Buckets, ADocumentGoesToTheSmallestBucketThatHoldsIt) {
  const std::vector<int64_t> bounds = {8, 16, 64};
  EXPECT_EQ(bucket_of(bounds, 1), 0);
  EXPECT_EQ(bucket_of(bounds, 8), 0);
  EXPECT_EQ(bucket_of(bounds, 9), 1);
  EXPECT_EQ(bucket_of(bounds, 64), 2);
  EXPECT_EQ(bucket_of(bounds, 65), -1);
}

TEST(Buckets, RowsFollowTheBudgetAfterPaddingAndTheCap) {
  // Bucket 8: 32 / 8 = 4 rows; bucket 16: 2 rows; bucket 64: 1 row (longer
  // than the budget alone).
  Corpus c({3, 12, 7, 40, 8, 2, 15, 1, 9, 5, 50}, true);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.buckets = {8, 16, 64};
  o.max_tokens_per_micro_batch = 32;
  o.shuffle = false;
  o.pad_id = 3;
  Batcher batcher(c.dataset, o);
  // Bucket 0 holds 0 2 4 5 7 9 (2 micro-batches), bucket 1 holds 1 6 8 (2),
  // bucket 2 holds 3 10 (2). Without shuffle: the largest share left first,
  // the smallest bucket on ties.
  EXPECT_EQ(batcher.epoch_bins(0),
            (std::vector<std::vector<int64_t>>{{0, 2, 4, 5}, {1, 6}, {3}, {7, 9}, {8}, {10}}));
  std::vector<int64_t> widths, buckets;
  for (int step = 0; step < 6; ++step) {
    const MicroBatchPlan mb = batcher.next_step_plan()[0][0];
    widths.push_back(mb.width);
    buckets.push_back(mb.bucket);
  }
  EXPECT_EQ(widths, (std::vector<int64_t>{8, 16, 64, 8, 16, 64}));
  EXPECT_EQ(buckets, (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  Batch b = Batcher(c.dataset, o).next_step()[0];
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 8, 16, 24, 32}));
  EXPECT_EQ(b.padding, 32 - (3 + 7 + 8 + 2));
  check_batch(b, c, o);

  o.micro_batch_size = 3;  // a cap on the rows
  EXPECT_EQ(Batcher(c.dataset, o).epoch_bins(0),
            (std::vector<std::vector<int64_t>>{{0, 2, 4}, {1, 6}, {3}, {5, 7, 9}, {8}, {10}}));
  o.micro_batch_size = 0;
  o.pad_to = BatchOptions::PadTo::kLongest;
  Batcher longest(c.dataset, o);
  b = longest.next_step()[0];
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 8, 16, 24, 32})) << "8 is the longest row";
  b = longest.next_step()[0];
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 15, 30})) << "12 and 15 padded to 15";
  check_batch(b, c, o);
}

TEST(Buckets, PastTheLastBucketTruncatedWithMaxSampleTokensElseRefused) {
  Corpus c({5, 30, 6, 12}, false);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.buckets = {8, 16};
  o.max_tokens_per_micro_batch = 16;
  o.shuffle = false;
  expect_contains(usage_error([&] { Batcher(c.dataset, o); }),
                  "corpus.h5: batching: document 1 has 30 tokens, more than the last bucket (16): "
                  "raise the last boundary of batch.buckets, or set data.max_sample_tokens");
  o.max_sample_tokens = 100;  // truncation is allowed: to the last bucket
  Batcher cut(c.dataset, o);
  EXPECT_EQ(cut.batched_length(1), 16);
  EXPECT_EQ(cut.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0, 2}, {1}, {3}}));
  cut.next_step();
  const Batch b = cut.next_step()[0];
  EXPECT_EQ(b.size(), 16);
  EXPECT_EQ(b.truncated, 1) << "counted";
  check_batch(b, c, cut.options());
  o.max_sample_tokens = 10;  // tighter than the last bucket: it rules
  EXPECT_EQ(Batcher(c.dataset, o).batched_length(1), 10);
  o.max_sample_tokens = 0;
  o.buckets.clear();
  o.auto_buckets = true;  // the longest is the last boundary: nothing is refused
  Batcher automatic(c.dataset, o);
  EXPECT_EQ(automatic.options().buckets, (std::vector<int64_t>{8, 16, 30}));
  EXPECT_FALSE(automatic.options().auto_buckets) << "options() are resolved";
}

TEST(Buckets, RefusesImpossibleOptions) {
  Corpus c({3, 4, 2, 9}, false);
  auto make = [&c](BatchOptions o) { Batcher batcher(c.dataset, o); };
  BatchOptions o;
  o.buckets = {8, 16};
  expect_contains(usage_error([&] { make(o); }), "batching: buckets are for padded mode");
  o.mode = BatchOptions::Mode::kPadded;
  o.buckets = {8, 8};
  expect_contains(usage_error([&] { make(o); }), "bucket boundaries must increase: 8 follows 8");
  o.buckets = {0, 8};
  expect_contains(usage_error([&] { make(o); }), "bucket boundary 0 must be in [1, 2^31)");
  o.buckets = {16};
  o.seq_len = 16;
  expect_contains(usage_error([&] { make(o); }),
                  "seq_len = 16 pads every row to one length: it cannot be combined with buckets");
  o.seq_len = 0;
  o.micro_batch_size = -1;
  expect_contains(usage_error([&] { make(o); }),
                  "micro_batch_size = -1 must be >= 0 (0 = no cap on rows)");
  o.micro_batch_size = 0;
  o.auto_buckets = true;
  expect_contains(usage_error([&] { make(o); }), "either \"auto\" or given, not both");
}

TEST(Buckets, TheDrawSpreadsTheLongMicroBatchesOverTheEpoch) {
  // 400 short and 40 long documents: 100 micro-batches of 4 rows and 40 of
  // one. Weighted by what is left, the long ones are spread out, not left
  // for the end: each half of the epoch gets a fair share.
  std::vector<int64_t> lengths;
  for (int d = 0; d < 440; ++d)
    lengths.push_back(d % 11 == 0 ? 60 : 1 + d % 8);
  Corpus c(lengths, false);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.buckets = {8, 64};
  o.max_tokens_per_micro_batch = 32;
  for (bool shuffle : {true, false}) {
    o.shuffle = shuffle;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      o.seed = seed;
      Batcher batcher(c.dataset, o);
      const std::vector<std::vector<int64_t>> bins = batcher.epoch_bins(0);
      ASSERT_EQ(bins.size(), 140u);
      int long_in_first_half = 0;
      for (size_t b = 0; b < 70; ++b)
        long_in_first_half += bins[b].size() == 1;
      EXPECT_GE(long_in_first_half, 12) << "seed " << seed;
      EXPECT_LE(long_in_first_half, 28) << "seed " << seed;
    }
  }
}

// Padded options with buckets drawn at random, and lengths to match.
Trial random_bucket_trial(std::mt19937_64& rng) {
  auto below = [&rng](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  Trial t;
  BatchOptions& o = t.options;
  o.mode = BatchOptions::Mode::kPadded;
  o.max_tokens_per_micro_batch = 1 + below(400);
  o.grad_accum = 1 + static_cast<int>(below(4));
  o.world_size = 1 + static_cast<int>(below(4));
  o.max_sample_tokens = below(2) ? 0 : 1 + below(300);
  o.micro_batch_size = below(2) ? 0 : 1 + below(6);
  o.pad_to = below(2) ? BatchOptions::PadTo::kBucket : BatchOptions::PadTo::kLongest;
  o.pad_id = static_cast<int32_t>(below(100));
  o.shuffle = below(4) != 0;
  o.seed = rng();
  if (below(3) == 0) {
    o.auto_buckets = true;
  } else {
    int64_t boundary = 0;
    for (int64_t k = 1 + below(5); k > 0; --k)
      o.buckets.push_back(boundary += 1 + below(k == 1 ? 200 : 60));
  }
  const int64_t n = 1 + below(300);
  t.shape = static_cast<int>(below(4));
  for (int64_t d = 0; d < n; ++d) {
    int64_t length = 0;
    switch (t.shape) {
      case 0:  // uniform
        length = below(250);
        break;
      case 1: {  // lognormal-like: most short, a long tail
        const double u = static_cast<double>(below(1000) + 1) / 1001.0;
        length = static_cast<int64_t>(
            20.0 * std::exp(1.2 * std::sqrt(-2.0 * std::log(u)) * (below(2) ? 1.0 : -1.0)));
        break;
      }
      case 2:  // two modes, as seed 001's mix (7k and 24k, scaled)
        length = below(4) == 0 ? 200 + below(40) : 50 + below(20);
        break;
      default:  // empty and one-token documents mixed in
        length = below(3) == 0 ? 0 : below(3) == 0 ? 1 : below(120);
        break;
    }
    t.lengths.push_back(length);
  }
  // Never-truncate with given buckets would refuse the longer documents.
  if (o.max_sample_tokens == 0 && !o.buckets.empty())
    for (int64_t& length : t.lengths)
      length = std::min(length, o.buckets.back());
  if (std::none_of(t.lengths.begin(), t.lengths.end(), [](int64_t l) { return l >= 2; }))
    t.lengths[0] = 2;
  // Drawn last, so the draws above are those of the trials before rows
  // could be padded to a multiple.
  if (below(3) == 0) o.pad_to_multiple_of = 1 + below(64);
  return t;
}

TEST(Buckets, PropertiesOverRandomCorporaBucketsBudgetsAndWorldSizes) {
  std::mt19937_64 rng(20261202);
  for (int trial = 0; trial < 80; ++trial) {
    const Trial t = random_bucket_trial(rng);
    const int64_t n = static_cast<int64_t>(t.lengths.size());
    Corpus c(t.lengths, trial % 2 == 0);
    std::string buckets;
    for (int64_t b : t.options.buckets)
      buckets += std::to_string(b) + " ";
    SCOPED_TRACE("trial " + std::to_string(trial) + ": buckets " +
                 (t.options.auto_buckets ? "auto" : buckets) + ", budget " +
                 std::to_string(t.options.max_tokens_per_micro_batch) + ", grad_accum " +
                 std::to_string(t.options.grad_accum) + ", world_size " +
                 std::to_string(t.options.world_size) + ", max_sample_tokens " +
                 std::to_string(t.options.max_sample_tokens) + ", micro_batch_size " +
                 std::to_string(t.options.micro_batch_size) + ", pad_to " +
                 std::to_string(static_cast<int>(t.options.pad_to)) + ", pad_to_multiple_of " +
                 std::to_string(t.options.pad_to_multiple_of) + ", shape " +
                 std::to_string(t.shape) + ", documents " + std::to_string(n));
    Batcher planner(c.dataset, t.options);
    const BatchOptions& o = planner.options();  // buckets resolved
    ASSERT_FALSE(o.buckets.empty());
    const int64_t budget = o.max_tokens_per_micro_batch;
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < n; ++d)
      if (t.lengths[static_cast<size_t>(d)] > 0) kept.push_back(d);

    // The epochs' bins: the same for every rank and every world size.
    BatchOptions alone = t.options;
    alone.world_size = 1;
    alone.grad_accum = 1;
    Batcher single(c.dataset, alone);
    const int epochs = 3;
    std::vector<std::vector<std::vector<int64_t>>> plans;
    size_t stream_bins = 0;
    for (int e = 0; e < epochs; ++e) {
      plans.push_back(planner.epoch_bins(e));
      stream_bins += plans.back().size();
      EXPECT_EQ(plans.back(), single.epoch_bins(e)) << "the world size changed epoch " << e;
      std::vector<int64_t> order;
      for (const std::vector<int64_t>& bin : plans.back()) {
        EXPECT_FALSE(bin.empty()) << "epoch " << e << " has an empty micro-batch";
        order.insert(order.end(), bin.begin(), bin.end());
      }
      std::sort(order.begin(), order.end());
      EXPECT_EQ(order, kept) << "epoch " << e << ": not every kept document exactly once ("
                             << order.size() << " placed of " << kept.size() << ")";
    }

    // Step after step: each rank gets grad_accum micro-batches of one bucket
    // each, within the budget after padding except a single row.
    const size_t per_step = static_cast<size_t>(o.world_size) * o.grad_accum;
    std::vector<Cursor> cursors;
    std::vector<std::vector<std::vector<MicroBatchPlan>>> steps;
    std::vector<Batcher> ranks;
    for (int r = 0; r < o.world_size; ++r) {
      BatchOptions mine = t.options;
      mine.rank = r;
      ranks.emplace_back(c.dataset, mine);
    }
    // At least the three epochs' bins (a step may span several epochs).
    for (size_t consumed = 0; consumed < stream_bins; consumed += per_step) {
      cursors.push_back(planner.cursor());
      steps.push_back(planner.next_step_plan());
      const std::vector<std::vector<MicroBatchPlan>>& plan = steps.back();
      ASSERT_EQ(plan.size(), static_cast<size_t>(o.world_size));
      for (int r = 0; r < o.world_size; ++r) {
        const std::vector<MicroBatchPlan>& mine = plan[static_cast<size_t>(r)];
        ASSERT_EQ(mine.size(), static_cast<size_t>(o.grad_accum)) << "equal counts per rank";
        const std::vector<Batch> got = ranks[static_cast<size_t>(r)].next_step();
        ASSERT_EQ(got.size(), mine.size());
        for (size_t i = 0; i < mine.size(); ++i) {
          const MicroBatchPlan& mb = mine[i];
          const int64_t rows = static_cast<int64_t>(mb.documents.size());
          EXPECT_TRUE(mb.tokens <= budget || rows == 1)
              << mb.tokens << " tokens in " << rows << " rows over a budget of " << budget;
          ASSERT_GE(mb.bucket, 0);
          const int64_t boundary = o.buckets[static_cast<size_t>(mb.bucket)];
          const int64_t lower = mb.bucket > 0 ? o.buckets[static_cast<size_t>(mb.bucket) - 1] : 0;
          int64_t longest = 0;
          for (int64_t d : mb.documents) {
            const int64_t length = c.packed_length(d, o);
            EXPECT_TRUE(length > lower && length <= boundary)
                << "document " << d << " of " << length << " tokens in bucket " << boundary;
            longest = std::max(longest, length);
          }
          const int64_t m = o.pad_to_multiple_of;
          EXPECT_EQ(mb.width,
                    round_up(o.pad_to == BatchOptions::PadTo::kBucket ? boundary : longest, m));
          EXPECT_EQ(mb.tokens, rows * mb.width);
          int64_t most_rows = std::max<int64_t>(1, budget / round_up(boundary, m));
          if (o.micro_batch_size > 0) most_rows = std::min(most_rows, o.micro_batch_size);
          EXPECT_LE(rows, most_rows);
          EXPECT_EQ(check_batch(got[i], c, o), mb.documents) << "rank " << r;
          EXPECT_EQ(got[i].size(), mb.tokens);
          EXPECT_EQ(got[i].padding, mb.padding);
        }
      }
      if (::testing::Test::HasFailure()) return;
    }
    // Within an epoch a bucket's micro-batches are full but for its last.
    for (const auto& plan : plans) {
      std::map<int64_t, std::vector<int64_t>> rows_of_bucket;
      for (const std::vector<int64_t>& bin : plan)
        rows_of_bucket[bucket_of(o.buckets, c.packed_length(bin.front(), o))].push_back(
            static_cast<int64_t>(bin.size()));
      for (const auto& [bucket, rows] : rows_of_bucket)
        for (size_t i = 0; i + 1 < rows.size(); ++i)
          EXPECT_EQ(rows[i], rows.front()) << "bucket " << bucket << " micro-batch " << i;
    }

    // Resuming at any step's cursor continues with the identical steps,
    // across the epoch boundaries that follow.
    ASSERT_GE(planner.cursor().epoch, 1) << "the steps crossed an epoch boundary";
    const size_t from = static_cast<size_t>(rng() % cursors.size());
    Batcher resumed(c.dataset, t.options);
    resumed.set_cursor(cursors[from]);
    for (size_t s = from; s < steps.size(); ++s) {
      const std::vector<std::vector<MicroBatchPlan>> again = resumed.next_step_plan();
      for (size_t r = 0; r < again.size(); ++r)
        for (size_t i = 0; i < again[r].size(); ++i) {
          EXPECT_EQ(again[r][i].documents, steps[s][r][i].documents) << "step " << s;
          EXPECT_EQ(again[r][i].epoch, steps[s][r][i].epoch);
          EXPECT_EQ(again[r][i].bin, steps[s][r][i].bin);
        }
    }
    EXPECT_EQ(resumed.cursor(), planner.cursor());
  }
}

TEST(Buckets, PlainPaddedIsUnchangedWithoutBuckets) {
  // The bins of padded mode without buckets, pinned: consecutive documents,
  // micro_batch_size each, whatever pad_to says.
  Corpus c({5, 3, 8, 2, 4, 7, 1}, false);
  BatchOptions o;
  o.mode = BatchOptions::Mode::kPadded;
  o.micro_batch_size = 3;
  o.seed = 9;
  for (BatchOptions::PadTo pad_to : {BatchOptions::PadTo::kBucket, BatchOptions::PadTo::kLongest}) {
    o.pad_to = pad_to;
    Batcher batcher(c.dataset, o);
    const std::vector<int64_t> visit =
        visiting_order(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}, o, 0);
    EXPECT_EQ(batcher.epoch_bins(0),
              (std::vector<std::vector<int64_t>>{
                  {visit[0], visit[1], visit[2]}, {visit[3], visit[4], visit[5]}, {visit[6]}}));
    const MicroBatchPlan mb = batcher.next_step_plan()[0][0];
    EXPECT_EQ(mb.bucket, -1);
    EXPECT_EQ(mb.width, std::max({c.lengths[static_cast<size_t>(visit[0])],
                                  c.lengths[static_cast<size_t>(visit[1])],
                                  c.lengths[static_cast<size_t>(visit[2])]}));
  }
}

}  // namespace
}  // namespace headroom
