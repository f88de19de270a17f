// PackedBatcher: the packing rule, its invariants as properties over random
// length distributions and options, and exact resumption from a cursor.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "data/packer.h"
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
    TokenDatasetAttributes attributes;
    attributes.vocab_size = kVocab;
    attributes.tokenizer = "test";
    attributes.created_by = "test_packer";
    const std::string path = dir.file("corpus.h5");
    TokenDatasetWriter writer(path, attributes, mask);
    for (size_t d = 0; d < lengths.size(); ++d) {
      std::vector<int32_t> tokens;
      std::vector<uint8_t> masks;
      for (int64_t t = 0; t < lengths[d]; ++t) {
        tokens.push_back(token_of(static_cast<int64_t>(d), t));
        masks.push_back(mask_of(static_cast<int64_t>(d), t));
      }
      writer.append_document(tokens,
                             mask ? std::span<const uint8_t>(masks) : std::span<const uint8_t>());
    }
    writer.finish();
    return TokenDataset::open(path, kVocab);
  }

  int64_t packed_length(int64_t d, const PackOptions& o) const {
    const int64_t length = lengths[static_cast<size_t>(d)];
    return o.max_sample_tokens > 0 ? std::min(length, o.max_sample_tokens) : length;
  }
};

// Checks one micro-batch against the corpus, from first principles, and
// returns the documents it holds in order.
std::vector<int64_t> check_batch(const Batch& b, const Corpus& c, const PackOptions& o) {
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
  for (size_t i = 0; i + 1 < b.cu_seqlens.size(); ++i) {
    const int64_t start = b.cu_seqlens[i];
    const int64_t length = b.cu_seqlens[i + 1] - start;
    EXPECT_GT(length, 0) << "cu_seqlens must increase";
    if (length <= 0) return documents;
    const int64_t d = b.tokens[static_cast<size_t>(start)];
    EXPECT_LT(d, static_cast<int64_t>(c.lengths.size()));
    if (d >= static_cast<int64_t>(c.lengths.size())) return documents;
    documents.push_back(d);
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
  EXPECT_EQ(b.padding, 0);
  const bool alone_and_oversize = documents.size() == 1 && T > o.max_tokens_per_micro_batch;
  EXPECT_TRUE(T <= o.max_tokens_per_micro_batch || alone_and_oversize)
      << T << " tokens in " << documents.size() << " documents over a budget of "
      << o.max_tokens_per_micro_batch;
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

TEST(PackInOrder, ClosesTheOpenBinWhenTheNextDocumentDoesNotFit) {
  const std::vector<int64_t> lengths = {3, 4, 5, 20, 2, 2, 9, 1, 10};
  // [3 4] [5] [20] alone and oversize, [2 2] [9 1] full to the budget, [10]
  EXPECT_EQ(pack_in_order(lengths, 10), (std::vector<int64_t>{0, 2, 3, 4, 6, 8, 9}));
  EXPECT_EQ(pack_in_order(std::vector<int64_t>{}, 10), std::vector<int64_t>{0});
  EXPECT_EQ(pack_in_order(std::vector<int64_t>{7, 7}, 1), (std::vector<int64_t>{0, 1, 2}));
  // At most two documents per bin (batch.micro_batch_size = 2).
  EXPECT_EQ(pack_in_order(std::vector<int64_t>{1, 1, 1, 1, 1}, 10, 2),
            (std::vector<int64_t>{0, 2, 4, 5}));
}

TEST(PackedBatcher, OversizeDocumentsGetABinOfTheirOwnAndTruncationIsCounted) {
  Corpus c({5, 30, 5, 5, 12}, false);
  PackOptions o;
  o.max_tokens_per_micro_batch = 10;
  o.shuffle = false;
  PackedBatcher batcher(c.dataset, o);
  EXPECT_EQ(batcher.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0}, {1}, {2, 3}, {4}}));
  std::vector<Batch> step = batcher.next_step();
  ASSERT_EQ(step.size(), 1u);
  step = batcher.next_step();
  EXPECT_EQ(step[0].size(), 30) << "the 30-token document is neither split nor dropped";
  EXPECT_EQ(step[0].truncated, 0);

  o.max_sample_tokens = 8;  // now every document fits; the 30 and the 12 are cut to 8
  PackedBatcher capped(c.dataset, o);
  EXPECT_EQ(capped.epoch_bins(0), (std::vector<std::vector<int64_t>>{{0}, {1}, {2, 3}, {4}}));
  capped.next_step();
  Batch cut = capped.next_step()[0];
  EXPECT_EQ(cut.size(), 8);
  EXPECT_EQ(cut.truncated, 1);
  EXPECT_EQ(cut.targets.back(), -1) << "a truncated document's last token predicts nothing";
  check_batch(cut, c, o);
}

TEST(PackedBatcher, PropertiesOverRandomCorporaAndOptions) {
  std::mt19937_64 rng(20260905);
  auto below = [&rng](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  for (int trial = 0; trial < 40; ++trial) {
    PackOptions o;
    o.max_tokens_per_micro_batch = 1 + below(200);
    o.grad_accum = 1 + static_cast<int>(below(4));
    o.world_size = 1 + static_cast<int>(below(4));
    o.max_sample_tokens = below(2) ? 0 : 1 + below(150);
    o.max_documents_per_micro_batch = below(3) == 0 ? 1 + below(5) : 0;
    o.shuffle = below(4) != 0;
    o.seed = rng();
    const int64_t budget = o.max_tokens_per_micro_batch;
    const int64_t n = 1 + below(300);
    const int shape = static_cast<int>(below(5));
    std::vector<int64_t> lengths;
    for (int64_t d = 0; d < n; ++d) {
      switch (shape) {
        case 0:  // short documents, many per bin
          lengths.push_back(1 + below(50));
          break;
        case 1:  // heavy tail: mostly short, some far over the budget
          lengths.push_back(below(10) == 0 ? budget + below(4 * budget) : 1 + below(budget));
          break;
        case 2:  // everything oversize
          lengths.push_back(budget + 1 + below(100));
          break;
        case 3:  // empty and one-token documents mixed in
          lengths.push_back(below(3) == 0 ? 0 : below(3) == 0 ? 1 : below(2 * budget));
          break;
        default:  // exactly the budget
          lengths.push_back(budget);
          break;
      }
    }
    if (std::all_of(lengths.begin(), lengths.end(), [](int64_t l) { return l == 0; }))
      lengths[0] = 1;
    Corpus c(lengths, below(2) == 0);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": budget " + std::to_string(budget) +
                 ", grad_accum " + std::to_string(o.grad_accum) + ", world_size " +
                 std::to_string(o.world_size) + ", max_sample_tokens " +
                 std::to_string(o.max_sample_tokens) + ", max documents " +
                 std::to_string(o.max_documents_per_micro_batch) + ", shape " +
                 std::to_string(shape) + ", documents " + std::to_string(n));

    std::vector<PackedBatcher> ranks;
    for (int r = 0; r < o.world_size; ++r) {
      PackOptions mine = o;
      mine.rank = r;
      ranks.emplace_back(c.dataset, mine);
    }
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < n; ++d)
      if (lengths[static_cast<size_t>(d)] > 0) kept.push_back(d);
    ASSERT_EQ(ranks[0].num_kept_documents(), static_cast<int64_t>(kept.size()));

    const int epochs = 3;
    std::vector<std::vector<std::vector<int64_t>>> plans;
    int64_t planned_bins = 0;
    for (int e = 0; e < epochs; ++e) {
      plans.push_back(ranks[0].epoch_bins(e));
      planned_bins += static_cast<int64_t>(plans.back().size());
      EXPECT_EQ(plans.back(), ranks[o.world_size - 1].epoch_bins(e)) << "ranks disagree";
    }
    const int64_t per_step = int64_t{o.world_size} * o.grad_accum;
    // Every rank's micro-batches, dealt back into the global order of bins.
    std::vector<std::vector<int64_t>> global;
    while (static_cast<int64_t>(global.size()) < planned_bins) {
      std::vector<std::vector<Batch>> steps;
      for (PackedBatcher& rank : ranks) {
        steps.push_back(rank.next_step());
        ASSERT_EQ(steps.back().size(), static_cast<size_t>(o.grad_accum))
            << "every rank gets grad_accum micro-batches per step";
      }
      for (int i = 0; i < o.grad_accum; ++i)
        for (int r = 0; r < o.world_size; ++r)
          global.push_back(
              check_batch(steps[static_cast<size_t>(r)][static_cast<size_t>(i)], c, o));
      if (::testing::Test::HasFailure()) return;
      EXPECT_EQ(static_cast<int64_t>(global.size()) % per_step, 0);
    }
    for (PackedBatcher& rank : ranks)
      EXPECT_EQ(rank.cursor(), ranks[0].cursor());

    size_t next = 0;
    std::vector<std::vector<int64_t>> orders;
    for (int e = 0; e < epochs; ++e) {
      const std::vector<std::vector<int64_t>>& plan = plans[static_cast<size_t>(e)];
      std::vector<int64_t> order;
      for (size_t b = 0; b < plan.size(); ++b, ++next) {
        const std::vector<int64_t>& bin = global[next];
        EXPECT_EQ(bin, plan[b]) << "epoch " << e << " bin " << b << ": batches differ from plan";
        order.insert(order.end(), bin.begin(), bin.end());
        const int64_t cap = o.max_documents_per_micro_batch;
        if (cap > 0) {
          EXPECT_LE(static_cast<int64_t>(bin.size()), cap) << "epoch " << e << " bin " << b;
        }
        // The bin was closed only because the next document did not fit (or
        // it holds as many documents as allowed).
        if (b + 1 < plan.size() && (cap == 0 || static_cast<int64_t>(bin.size()) < cap)) {
          int64_t tokens = 0;
          for (int64_t d : bin)
            tokens += c.packed_length(d, o);
          EXPECT_GT(tokens + c.packed_length(plan[b + 1].front(), o), budget)
              << "epoch " << e << " bin " << b << " closed with room for the next document";
        }
      }
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, kept) << "epoch " << e << ": not every document exactly once";
      if (!o.shuffle) {
        EXPECT_EQ(order, kept) << "without shuffle, file order";
      }
      orders.push_back(order);
    }
    if (o.shuffle && kept.size() >= 10) {
      EXPECT_NE(orders[0], orders[1]) << "each epoch has its own permutation";
    }
  }
}

TEST(PackedBatcher, ShuffleIsDeterministicBySeed) {
  std::vector<int64_t> lengths;
  for (int d = 0; d < 200; ++d)
    lengths.push_back(1 + (d * 37) % 90);
  Corpus c(lengths, false);
  PackOptions o;
  o.max_tokens_per_micro_batch = 128;
  o.seed = 5;
  PackedBatcher a(c.dataset, o);
  PackedBatcher b(c.dataset, o);
  o.seed = 6;
  PackedBatcher other(c.dataset, o);
  EXPECT_EQ(a.epoch_bins(3), b.epoch_bins(3));
  EXPECT_NE(a.epoch_bins(0), other.epoch_bins(0));
  for (int step = 0; step < 5; ++step)
    expect_same_batch(a.next_step()[0], b.next_step()[0]);
}

TEST(PackedBatcher, ResumingFromACursorGivesTheIdenticalSequence) {
  std::vector<int64_t> lengths;
  for (int d = 0; d < 60; ++d)
    lengths.push_back(d % 7 == 0 ? 0 : 1 + (d * 53) % 120);
  Corpus c(lengths, true);
  for (int rank = 0; rank < 2; ++rank) {
    PackOptions o;
    o.max_tokens_per_micro_batch = 100;
    o.grad_accum = 3;
    o.world_size = 2;
    o.rank = rank;
    o.max_sample_tokens = 90;
    PackedBatcher original(c.dataset, o);
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

    PackedBatcher resumed(c.dataset, o);
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
    PackedBatcher late(c.dataset, o);
    late.set_cursor(before_last);
    std::vector<Batch> last = late.next_step();
    for (size_t i = 0; i < last.size(); ++i)
      expect_same_batch(last[i], expected.back()[i]);
  }
}

TEST(PackedBatcher, AStepCanSpanSeveralEpochs) {
  Corpus c({3, 4, 2}, false);  // one bin per epoch
  PackOptions o;
  o.max_tokens_per_micro_batch = 64;
  o.grad_accum = 2;
  o.world_size = 3;
  o.rank = 2;
  PackedBatcher batcher(c.dataset, o);
  std::vector<Batch> step = batcher.next_step();
  ASSERT_EQ(step.size(), 2u);
  for (const Batch& b : step)
    EXPECT_EQ(b.size(), 9);
  EXPECT_EQ(batcher.cursor(), (Cursor{6, 0}));
}

TEST(PackedBatcher, RefusesImpossibleOptionsAndCursors) {
  Corpus c({3, 4, 2, 9}, false);
  auto make = [&c](PackOptions o) { PackedBatcher batcher(c.dataset, o); };
  PackOptions o;
  o.max_tokens_per_micro_batch = 0;
  expect_contains(usage_error([&] { make(o); }),
                  "corpus.h5: packing: max_tokens_per_micro_batch = 0");
  o = PackOptions{};
  o.grad_accum = 0;
  expect_contains(usage_error([&] { make(o); }), "grad_accum = 0 must be >= 1");
  o = PackOptions{};
  o.world_size = 2;
  o.rank = 2;
  expect_contains(usage_error([&] { make(o); }), "rank 2 of world_size 2 is not a rank");
  o = PackOptions{};
  o.max_sample_tokens = -1;
  expect_contains(usage_error([&] { make(o); }), "max_sample_tokens = -1");
  o = PackOptions{};
  o.max_documents_per_micro_batch = -1;
  expect_contains(usage_error([&] { make(o); }), "max_documents_per_micro_batch = -1");

  PackedBatcher batcher(c.dataset, PackOptions{});
  expect_contains(usage_error([&] {
                    batcher.set_cursor(Cursor{0, 1});
                  }),
                  "data cursor (epoch 0, position 1) is past the 1 micro-batches of that epoch");
  expect_contains(usage_error([&] { batcher.set_cursor(Cursor{-1, 0}); }), "is negative");
  EXPECT_EQ(batcher.cursor(), (Cursor{0, 0})) << "a refused cursor changes nothing";

  Corpus empty({0, 0}, false);
  expect_contains(usage_error([&] { PackedBatcher(empty.dataset, PackOptions{}); }),
                  "corpus.h5: no document has any tokens");
}

}  // namespace
}  // namespace headroom
