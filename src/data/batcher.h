// Batcher: turns a TokenDataset into the micro-batches of each step, for
// every rank, the way seed 001's MAX_TOKENS_PER_GPU works (packed) or the way
// a HuggingFace DataLoader with padding does (padded).
//
// An epoch visits the documents with at least one token (empty documents have
// nothing to train on) in a permutation seeded by (seed, epoch), or in file
// order without shuffle, and groups them into bins, one bin per micro-batch:
//
// Packed (THD: documents end to end, cu_seqlens, per-document positions; the
// attention never crosses documents). Bins hold at most
// max_tokens_per_micro_batch tokens (and, when micro_batch_size > 0, at most
// that many documents). The visiting order is cut into windows of
// packing_window documents (0 = the whole epoch); each window is packed on
// its own, its bins emitted in the order they were opened:
//   - next_fit: a document joins the open bin or closes it (only the newest
//     bin is ever tried: the shuffled order is kept exactly);
//   - first_fit: a document joins the first bin of its window with room
//     (tighter bins, the order is kept within a window);
//   - first_fit_decreasing: the window is sorted longest first, then
//     first_fit (tightest; long documents lead each window).
// In every case:
//   - every bin holds <= budget tokens, except a bin holding exactly one
//     document that alone exceeds the budget: such a document is never split
//     or dropped, it gets a bin of its own;
//   - the largest micro-batch is max(budget, longest kept document), and
//     max_sample_tokens caps the second: longer documents keep their first
//     max_sample_tokens tokens (counted in Batch::truncated);
//   - every kept document is placed exactly once per epoch.
// With pad_to_multiple_of = m > 0, a bin of F tokens is then padded to
// min(F rounded up to a multiple of m, max(F, budget)) tokens: one trailing
// segment of pad_id tokens of its own (positions from 0, no targets), which
// no document's token attends to under any mask. Token counts then repeat
// from step to step (F varies with every bin; the padded count takes one of
// a few values), and with them the shapes of every gemm: the cpu
// backend makes (JIT-compiles) a oneDNN primitive per new shape
// (cpu/gemm_plan.h), and a packed step of the quickstart met ~10 new ones.
//
// Padded: bins are micro_batch_size consecutive documents; each is one row,
// padded with pad_id to the longest row of its micro-batch, or to seq_len
// when that is set (longer documents are then truncated to seq_len). Padding
// tokens have no target and are counted in Batch::padding; a row stays one
// cu_seqlens segment so the attention costs what a dense (B, L) batch costs.
// With pad_to_multiple_of = m > 0 the row length (the longest row, seq_len,
// or a bucket's, below) is rounded up to a multiple of m, as Hugging Face's
// pad_to_multiple_of does; truncation is unchanged.
//
// Padded with buckets (batch.buckets: increasing boundaries b_0 < ... < b_k,
// resolved from the dataset by auto_bucket_boundaries() for "auto"): a
// document goes to the smallest bucket that holds it. One longer than b_k is
// truncated to b_k (counted in Batch::truncated) when max_sample_tokens > 0
// (truncation is then at min(max_sample_tokens, b_k)), and refused with a
// UsageError when max_sample_tokens = 0 ("never truncate"). Within a bucket,
// documents keep the epoch's visiting order (so each bucket is shuffled) and
// are cut into micro-batches of rows = max(1, max_tokens_per_micro_batch /
// b_i) documents, capped by micro_batch_size when that is > 0; rows are
// padded to b_i (pad_to = kBucket: few distinct shapes, which the caching
// allocator reuses) or to the longest row (kLongest), rounded up to a
// multiple of pad_to_multiple_of when that is > 0 (and b_i rounded alike in
// the rows' formula). So every micro-batch holds <= budget tokens after
// padding, except a single row longer than the budget. The buckets' micro-batches are then
// interleaved: each next one comes from a bucket drawn with probability proportional to the
// micro-batches it has left (a stream seeded by (seed, epoch); without
// shuffle, the bucket with the largest share left, smallest first on ties),
// so an epoch does not end with all its long micro-batches.
//
// Padded with length grouping (group_pool = G > 0, no buckets, seq_len = 0;
// HuggingFace's LengthGroupedSampler, whose megabatch is G = 50, and
// fairseq's batch_by_size): the visiting order (shuffled by (seed, epoch)) is
// cut into pools of consecutive documents worth G micro-batches: a pool takes
// documents until their rows (each length rounded up to pad_to_multiple_of)
// reach G * max_tokens_per_micro_batch tokens; when what is left of the
// epoch is worth less than half of that, it joins the pool (so the last pool
// holds between half and one and a half pools' worth). Each pool is sorted longest first (ties keep
// the visiting order) and cut, in that order, into micro-batches: the first (longest) row sets the
// width w (rounded up to pad_to_multiple_of), and the micro-batch takes
// max(1, max_tokens_per_micro_batch / w) rows, at most micro_batch_size when
// that is > 0. So every micro-batch holds <= budget tokens after padding,
// except a single row longer than the budget (as with buckets), and its rows
// differ in length only as much as neighbours in a sorted pool do. The
// epoch's micro-batches are then shuffled (a stream seeded by (seed, epoch);
// without shuffle they stay pool after pool, longest first).
//
// Steps and ranks. A step consumes the next world_size * grad_accum bins of
// the stream of epochs (a step may end one epoch and start the next, so
// every rank gets exactly grad_accum micro-batches per step without
// splitting, dropping or inventing samples). Those bins are dealt to ranks
// by cost (tokens including padding): sorted by cost, they form grad_accum
// rounds of world_size similar bins; in each round the costliest bin goes to
// the rank with the least work so far. So the k-th micro-batches of all
// ranks are alike (ZeRO-3 synchronizes every micro-batch) and each rank's
// step total is balanced as well as whole bins allow. The set of bins a step
// trains on depends only on (seed, epoch, options) and world_size *
// grad_accum, so 1 rank with grad_accum 4 trains on the same data per step as
// 4 ranks with grad_accum 1. All ranks compute the same plan without
// communicating; each reads only its own documents.
//
// The Cursor (epoch, position = bins of that epoch already consumed, all
// ranks together) is the whole resumable state: saved with a checkpoint and
// restored with set_cursor(), the batcher continues with the identical
// sequence, given the same dataset and options.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "data/batch.h"
#include "data/token_dataset.h"

namespace headroom {

struct BatchOptions {
  enum class Mode : uint8_t { kPacked, kPadded };
  enum class Packing : uint8_t { kNextFit, kFirstFit, kFirstFitDecreasing };
  enum class PadTo : uint8_t { kBucket, kLongest };

  Mode mode = Mode::kPacked;
  Packing packing = Packing::kFirstFit;
  int64_t packing_window = 0;                 // documents per packing window; 0 = the epoch
  int64_t max_tokens_per_micro_batch = 2048;  // packed: the bin's token budget
  int64_t pad_to_multiple_of = 0;             // bins / rows padded as above; 0 = not padded
  // Padded: rows per micro-batch (>= 1), or with buckets a cap on them (0 =
  // none); packed: a cap on documents per bin, 0 = none.
  int64_t micro_batch_size = 0;
  // Padded: bucket boundaries in tokens, increasing, each in [1, 2^31);
  // empty = no buckets. With auto_buckets the Batcher fills them in from the
  // dataset (auto_bucket_boundaries), and options() returns them resolved.
  std::vector<int64_t> buckets;
  bool auto_buckets = false;
  PadTo pad_to = PadTo::kBucket;  // bucketed rows: to the bucket's length or to the longest
  // Padded: length grouping over pools worth this many micro-batches (the
  // header comment); 0 = off. Excludes buckets and seq_len > 0.
  int64_t group_pool = 0;
  int64_t seq_len = 0;            // padded: every row this long; 0 = the longest row
  int32_t pad_id = 0;             // padded: the token of padding (it is never a target)
  int grad_accum = 1;             // micro-batches per rank per step
  int64_t max_sample_tokens = 0;  // longer documents are truncated; 0 = never
  bool shuffle = true;
  uint64_t seed = 1234;
  int world_size = 1;
  int rank = 0;
};

struct Cursor {
  int64_t epoch = 0;
  int64_t position = 0;  // bins of `epoch` consumed so far, by all ranks together

  bool operator==(const Cursor&) const = default;
};

// One micro-batch of the schedule, described without reading its tokens.
struct MicroBatchPlan {
  int64_t epoch = 0;
  int64_t bin = 0;                 // index of the bin within its epoch
  std::vector<int64_t> documents;  // dataset indices, in batch order
  int64_t tokens = 0;              // including padding
  int64_t padding = 0;
  int64_t longest = 0;    // tokens of the longest document, after truncation
  int64_t truncated = 0;  // documents cut to max_sample_tokens (or seq_len, or the last bucket)
  int64_t bucket = -1;    // index into options().buckets; -1 without buckets
  int64_t pool = -1;      // with group_pool: the pool of its epoch it came from; else -1
  int64_t width = 0;      // padded: the length of every row; 0 when packed
};

// The boundaries batch.buckets = "auto" stands for, from the lengths of the
// documents as batched (after max_sample_tokens; zeros are ignored): the at
// most kAutoBuckets boundaries, the last the longest, under which rows padded
// to their bucket's boundary hold the fewest padding tokens, chosen among the
// lengths at kAutoBucketQuantiles quantiles (nearest rank) rounded up to a
// multiple of 8 (the tensor-core tile) but not past the longest. An exact
// search (dynamic programming over the candidates), fewer buckets when more
// would save nothing. Increasing; empty when every length is 0.
// `headroom data inspect` suggests boundaries with it.
inline constexpr int64_t kAutoBuckets = 5;
inline constexpr int64_t kAutoBucketQuantiles = 256;
std::vector<int64_t> auto_bucket_boundaries(std::span<const int64_t> lengths);

// The smallest bucket of `boundaries` (increasing) that holds `length`, or
// -1 when length exceeds the last boundary.
int64_t bucket_of(std::span<const int64_t> boundaries, int64_t length);

// The packing rules on their own, over documents of `lengths` (each >= 1) in
// the given order: bins closed by `budget` and, when `max_documents` > 0, by
// count. Returns, for each document, the bin it joins; bins are numbered in
// the order they were opened.
std::vector<int64_t> next_fit(std::span<const int64_t> lengths, int64_t budget,
                              int64_t max_documents = 0);
std::vector<int64_t> first_fit(std::span<const int64_t> lengths, int64_t budget,
                               int64_t max_documents = 0);

// One epoch's bins, computed from document lengths alone.
struct EpochBins {
  std::vector<int64_t> order;       // documents, bin after bin
  std::vector<int64_t> bin_starts;  // into `order`; bins + 1 entries
  std::vector<int64_t> bin_cost;    // tokens of each bin, padding included
  std::vector<int64_t> bin_bucket;  // with buckets: each bin's bucket; else empty
  std::vector<int64_t> bin_pool;    // with group_pool: each bin's pool; else empty
  int64_t num_bins() const { return static_cast<int64_t>(bin_starts.size()) - 1; }
};

// The documents of `kept` in the visiting order of `epoch`: permuted by
// (options.seed, epoch), or as given without options.shuffle.
std::vector<int64_t> visiting_order(std::span<const int64_t> kept, const BatchOptions& options,
                                    int64_t epoch);

// Groups `visit` (documents in visiting order) into the bins of the header
// comment by options.mode, packing, packing_window, max_tokens_per_micro_batch,
// micro_batch_size, seq_len and (padded) buckets and pad_to, or group_pool;
// the buckets' interleaving and the pools' shuffle draw from (options.seed,
// epoch). `length[d]` is document d's
// length as batched (after truncation, so <= the last bucket), >= 1 for
// every visited d; options.buckets must be resolved (not auto).
EpochBins make_bins(std::vector<int64_t> visit, std::span<const int64_t> length,
                    const BatchOptions& options, int64_t epoch = 0);

// Deals `costs` (one step's bins) to `world_size` ranks, grad_accum =
// costs.size() / world_size each, as the header comment describes. Returns
// [rank][k] = index into costs. costs.size() must be a multiple of world_size.
std::vector<std::vector<int64_t>> deal_by_cost(std::span<const int64_t> costs, int world_size);

class Batcher {
 public:
  // Keeps a reference to `dataset`, which must outlive the batcher. Throws
  // UsageError for impossible options, a document longer than the last
  // bucket with max_sample_tokens = 0, or a dataset with nothing to learn
  // once documents are truncated as the options say
  // (TokenDataset::check_trainable).
  Batcher(const TokenDataset& dataset, BatchOptions options);

  // This rank's grad_accum micro-batches of the next step.
  std::vector<Batch> next_step();

  // The next step for every rank, [rank][micro-batch], without reading any
  // token; advances the cursor as next_step() does. For `headroom data
  // batches` and the planner.
  std::vector<std::vector<MicroBatchPlan>> next_step_plan();

  // Reads and assembles one planned micro-batch.
  Batch build(const MicroBatchPlan& plan) const;

  // Where the next step starts. Always normalized: position < bins of epoch.
  Cursor cursor() const { return cursor_; }
  // Resumes at `cursor`; a cursor this dataset and these options cannot have
  // produced (position past the epoch's bins) is a UsageError.
  void set_cursor(Cursor cursor);

  // The plan of an epoch, for all ranks: its bins as document indices in
  // batch order, bins in stream order. What tests inspect without tokens.
  std::vector<std::vector<int64_t>> epoch_bins(int64_t epoch) const;

  const BatchOptions& options() const { return options_; }
  // Documents placed each epoch (those with at least one token).
  int64_t num_kept_documents() const { return static_cast<int64_t>(kept_.size()); }
  // Tokens of `document` as batched: after max_sample_tokens (and seq_len,
  // or the last bucket).
  int64_t batched_length(int64_t document) const;

 private:
  struct EpochPlan : EpochBins {
    int64_t epoch = -1;
  };

  std::shared_ptr<const EpochPlan> plan_epoch(int64_t epoch) const;
  MicroBatchPlan describe(const EpochPlan& plan, int64_t bin) const;

  const TokenDataset& dataset_;
  BatchOptions options_;
  // max_sample_tokens, capped by seq_len or the last bucket in padded mode; 0 = never
  int64_t truncate_at_ = 0;
  std::vector<int64_t> length_;            // (documents) batched_length of each
  std::vector<int64_t> kept_;              // documents with at least one token, in file order
  std::shared_ptr<const EpochPlan> plan_;  // the plan of cursor_.epoch
  Cursor cursor_;
};

}  // namespace headroom
