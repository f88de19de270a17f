// PackedBatcher: turns a TokenDataset into packed (THD) micro-batches under a
// token budget, the way seed 001's MAX_TOKENS_PER_GPU works.
//
// Each epoch visits the documents in a permutation seeded by (seed, epoch)
// (or in file order without shuffle) and packs them into bins, in that order:
// a document joins the open bin if the bin stays within
// max_tokens_per_micro_batch (and, when max_documents_per_micro_batch > 0,
// under that many documents), else the bin is closed and a new one opened.
// (Megatron / slime call this first-fit; only the open bin is ever tried,
// which keeps the shuffled order and makes the plan a pure function of the
// lengths.) So:
//   - every bin holds <= budget tokens, except a bin holding exactly one
//     document that alone exceeds the budget: such a document is never split
//     or dropped, it gets a bin of its own;
//   - the largest micro-batch is max(budget, longest kept document), and
//     max_sample_tokens caps the second: longer documents keep their first
//     max_sample_tokens tokens (counted in Batch::truncated);
//   - every document with at least one token is placed exactly once per
//     epoch (empty documents have nothing to train on and are skipped).
//
// A step is grad_accum micro-batches per rank: it consumes the next
// world_size * grad_accum bins of the stream of epochs (a step may end one
// epoch and start the next), and bin j of the step goes to rank
// j % world_size. Every rank therefore gets the same number of micro-batches
// per step and all ranks agree on the plan without communicating; each rank
// reads only its own documents. Tokens are NOT balanced across ranks: a bin
// is closed as soon as the next document does not fit, so bins range from
// barely filled to the budget, and an oversize document's bin exceeds it; one
// rank can get a 24k-token document while the others get 8k bins and wait
// for it at the gradient reduction. Balancing (dealing a step's bins by cost
// instead of round-robin) is a later issue; it would not change which
// documents a step trains on, only which rank trains on them.
//
// The Cursor (epoch, position = bins of that epoch already consumed, all
// ranks together) is the whole resumable state: saved with a checkpoint and
// restored with set_cursor(), the batcher continues with the identical
// sequence — given the same dataset and options.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/token_dataset.h"
#include "model/batch.h"

namespace headroom {

struct PackOptions {
  int64_t max_tokens_per_micro_batch = 2048;  // the bin's token budget
  int grad_accum = 1;                         // micro-batches per rank per step
  int64_t max_sample_tokens = 0;              // longer documents are truncated; 0 = never
  int64_t max_documents_per_micro_batch = 0;  // batch.micro_batch_size in packed mode; 0 = no cap
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

// The packing rule on its own: bins for documents of `lengths`, visited in
// order, each closed when the next document would overflow `budget` or when
// it holds `max_documents` (0 = no cap). Returns bin starts: bin b holds
// lengths [starts[b], starts[b + 1]); one entry per bin plus one. Every
// length must be >= 1.
std::vector<int64_t> pack_in_order(std::span<const int64_t> lengths, int64_t budget,
                                   int64_t max_documents = 0);

class PackedBatcher {
 public:
  // Keeps a reference to `dataset`, which must outlive the batcher. Throws
  // UsageError for impossible options or a dataset with no non-empty document.
  PackedBatcher(const TokenDataset& dataset, PackOptions options);

  // This rank's grad_accum micro-batches of the next step.
  std::vector<Batch> next_step();

  // Where the next step starts. Always normalized: position < bins of epoch.
  Cursor cursor() const { return cursor_; }
  // Resumes at `cursor`; a cursor this dataset and these options cannot have
  // produced (position past the epoch's bins) is a UsageError.
  void set_cursor(Cursor cursor);

  // The plan of an epoch, for all ranks: its bins as document indices in
  // packing order. What the planner (and tests) inspect without reading tokens.
  std::vector<std::vector<int64_t>> epoch_bins(int64_t epoch) const;

  const PackOptions& options() const { return options_; }
  // Documents placed each epoch (those with at least one token).
  int64_t num_kept_documents() const { return static_cast<int64_t>(kept_.size()); }

 private:
  struct EpochPlan {
    int64_t epoch = -1;
    std::vector<int64_t> order;       // kept documents in visiting order
    std::vector<int64_t> bin_starts;  // into `order`; bins + 1 entries
    int64_t num_bins() const { return static_cast<int64_t>(bin_starts.size()) - 1; }
  };

  EpochPlan plan_epoch(int64_t epoch) const;
  int64_t packed_length(int64_t document) const;
  Batch build_bin(const EpochPlan& plan, int64_t bin) const;

  const TokenDataset& dataset_;
  PackOptions options_;
  std::vector<int64_t> kept_;  // documents with at least one token, in file order
  EpochPlan plan_;             // the plan of cursor_.epoch
  Cursor cursor_;
};

}  // namespace headroom
