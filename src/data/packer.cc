#include "data/packer.h"

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "data/random.h"
#include "util/error.h"

namespace headroom {

std::vector<int64_t> pack_in_order(std::span<const int64_t> lengths, int64_t budget,
                                   int64_t max_documents) {
  std::vector<int64_t> starts{0};
  int64_t open_tokens = 0;
  int64_t open_documents = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    HR_CHECK(lengths[i] >= 1, "packed documents have at least one token");
    // An empty bin takes any document, however long: that is how an
    // oversize document gets a bin of its own instead of being dropped.
    const bool full = max_documents > 0 && open_documents == max_documents;
    if (open_documents > 0 && (open_tokens + lengths[i] > budget || full)) {
      starts.push_back(static_cast<int64_t>(i));
      open_tokens = 0;
      open_documents = 0;
    }
    open_tokens += lengths[i];
    open_documents += 1;
  }
  if (!lengths.empty()) starts.push_back(static_cast<int64_t>(lengths.size()));
  return starts;
}

PackedBatcher::PackedBatcher(const TokenDataset& dataset, PackOptions options)
    : dataset_(dataset), options_(options) {
  const std::string where = dataset.path() + ": packing: ";
  if (options_.max_tokens_per_micro_batch < 1)
    throw UsageError(where + "max_tokens_per_micro_batch = " +
                     std::to_string(options_.max_tokens_per_micro_batch) + " must be >= 1");
  // cu_seqlens and positions are int32 (what attention kernels take).
  if (options_.max_tokens_per_micro_batch > std::numeric_limits<int32_t>::max())
    throw UsageError(where + "max_tokens_per_micro_batch must be < 2^31");
  if (options_.grad_accum < 1)
    throw UsageError(where + "grad_accum = " + std::to_string(options_.grad_accum) +
                     " must be >= 1");
  if (options_.max_sample_tokens < 0)
    throw UsageError(where + "max_sample_tokens = " + std::to_string(options_.max_sample_tokens) +
                     " must be >= 0 (0 = never truncate)");
  if (options_.max_documents_per_micro_batch < 0)
    throw UsageError(where + "max_documents_per_micro_batch = " +
                     std::to_string(options_.max_documents_per_micro_batch) +
                     " must be >= 0 (0 = no cap)");
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size)
    throw UsageError(where + "rank " + std::to_string(options_.rank) + " of world_size " +
                     std::to_string(options_.world_size) + " is not a rank");

  for (int64_t d = 0; d < dataset.num_documents(); ++d) {
    const int64_t length = packed_length(d);
    if (length == 0) continue;
    if (length > std::numeric_limits<int32_t>::max())
      throw UsageError(where + "document " + std::to_string(d) + " has " + std::to_string(length) +
                       " tokens; positions are int32: set data.max_sample_tokens");
    kept_.push_back(d);
  }
  if (kept_.empty()) throw UsageError(dataset.path() + ": no document has any tokens");
  plan_ = plan_epoch(0);
}

int64_t PackedBatcher::packed_length(int64_t document) const {
  const int64_t length = dataset_.document_length(document);
  return options_.max_sample_tokens > 0 ? std::min(length, options_.max_sample_tokens) : length;
}

PackedBatcher::EpochPlan PackedBatcher::plan_epoch(int64_t epoch) const {
  EpochPlan plan;
  plan.epoch = epoch;
  plan.order = kept_;
  if (options_.shuffle) {
    // Fisher-Yates with our own uniform_below: the same order on every
    // machine and standard library, which resuming on another node needs.
    std::mt19937_64 rng(data_detail::stream_seed(options_.seed, static_cast<uint64_t>(epoch)));
    for (size_t i = plan.order.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(data_detail::uniform_below(rng, i));
      std::swap(plan.order[i - 1], plan.order[j]);
    }
  }
  std::vector<int64_t> lengths(plan.order.size());
  for (size_t i = 0; i < plan.order.size(); ++i)
    lengths[i] = packed_length(plan.order[i]);
  plan.bin_starts = pack_in_order(lengths, options_.max_tokens_per_micro_batch,
                                  options_.max_documents_per_micro_batch);
  return plan;
}

Batch PackedBatcher::build_bin(const EpochPlan& plan, int64_t bin) const {
  const size_t first = static_cast<size_t>(plan.bin_starts[static_cast<size_t>(bin)]);
  const size_t last = static_cast<size_t>(plan.bin_starts[static_cast<size_t>(bin) + 1]);
  int64_t total = 0;
  for (size_t k = first; k < last; ++k)
    total += packed_length(plan.order[k]);
  HR_CHECK(total <= std::numeric_limits<int32_t>::max(), "a micro-batch's cu_seqlens fit int32");

  Batch batch;
  batch.tokens.reserve(static_cast<size_t>(total));
  batch.targets.reserve(static_cast<size_t>(total));
  batch.positions.reserve(static_cast<size_t>(total));
  batch.cu_seqlens.reserve(last - first + 1);
  batch.cu_seqlens.push_back(0);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (size_t k = first; k < last; ++k) {
    const int64_t document = plan.order[k];
    dataset_.read_document(document, tokens, mask, options_.max_sample_tokens);
    append_document(batch, tokens.data(), static_cast<int64_t>(tokens.size()),
                    mask.empty() ? nullptr : mask.data());
    if (static_cast<int64_t>(tokens.size()) < dataset_.document_length(document))
      batch.truncated += 1;
  }
  return batch;
}

std::vector<Batch> PackedBatcher::next_step() {
  std::vector<Batch> batches;
  batches.reserve(static_cast<size_t>(options_.grad_accum));
  const int64_t step_bins = int64_t{options_.world_size} * options_.grad_accum;
  for (int64_t j = 0; j < step_bins; ++j) {
    if (j % options_.world_size == options_.rank)
      batches.push_back(build_bin(plan_, cursor_.position));
    cursor_.position += 1;
    if (cursor_.position == plan_.num_bins()) {
      cursor_ = Cursor{cursor_.epoch + 1, 0};
      plan_ = plan_epoch(cursor_.epoch);
    }
  }
  return batches;
}

void PackedBatcher::set_cursor(Cursor cursor) {
  if (cursor.epoch < 0 || cursor.position < 0)
    throw UsageError(dataset_.path() + ": data cursor (epoch " + std::to_string(cursor.epoch) +
                     ", position " + std::to_string(cursor.position) + ") is negative");
  EpochPlan plan = cursor.epoch == plan_.epoch ? plan_ : plan_epoch(cursor.epoch);
  if (cursor.position >= plan.num_bins())
    throw UsageError(dataset_.path() + ": data cursor (epoch " + std::to_string(cursor.epoch) +
                     ", position " + std::to_string(cursor.position) + ") is past the " +
                     std::to_string(plan.num_bins()) +
                     " micro-batches of that epoch: the dataset or the batch options changed "
                     "since the checkpoint");
  plan_ = std::move(plan);
  cursor_ = cursor;
}

std::vector<std::vector<int64_t>> PackedBatcher::epoch_bins(int64_t epoch) const {
  HR_CHECK(epoch >= 0, "epochs count from 0");
  const EpochPlan plan = epoch == plan_.epoch ? plan_ : plan_epoch(epoch);
  std::vector<std::vector<int64_t>> bins(static_cast<size_t>(plan.num_bins()));
  for (size_t b = 0; b < bins.size(); ++b)
    bins[b].assign(plan.order.begin() + plan.bin_starts[b],
                   plan.order.begin() + plan.bin_starts[b + 1]);
  return bins;
}

}  // namespace headroom
