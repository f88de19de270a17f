#include "data/batcher.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "data/random.h"
#include "util/error.h"

namespace headroom {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Remaining room of each bin in a max-tree, to find the first bin a document
// fits in O(log bins). A bin that takes nothing more (full by count, or an
// oversize document alone) holds -1.
class FirstFitTree {
 public:
  // The first bin with room >= need (need >= 1), or -1.
  int64_t first_with_room(int64_t need) const {
    if (leaves_ == 0 || tree_[1] < need) return -1;
    size_t node = 1;
    while (node < leaves_)
      node = tree_[2 * node] >= need ? 2 * node : 2 * node + 1;
    return static_cast<int64_t>(node - leaves_);
  }
  int64_t open_bin(int64_t room) {
    if (bins_ == leaves_) grow();
    set(bins_, room);
    return static_cast<int64_t>(bins_++);
  }
  void set(size_t bin, int64_t room) {
    size_t node = bin + leaves_;
    tree_[node] = room;
    for (node /= 2; node >= 1; node /= 2)
      tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }

 private:
  void grow() {
    const size_t leaves = std::max<size_t>(16, 2 * leaves_);
    std::vector<int64_t> tree(2 * leaves, -1);
    for (size_t b = 0; b < bins_; ++b)
      tree[leaves + b] = tree_[leaves_ + b];
    for (size_t node = leaves - 1; node >= 1; --node)
      tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
    tree_ = std::move(tree);
    leaves_ = leaves;
  }

  std::vector<int64_t> tree_;
  size_t leaves_ = 0;
  size_t bins_ = 0;
};

}  // namespace

std::vector<int64_t> next_fit(std::span<const int64_t> lengths, int64_t budget,
                              int64_t max_documents) {
  std::vector<int64_t> bin_of(lengths.size());
  int64_t bin = -1;
  int64_t open_tokens = 0;
  int64_t open_documents = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    HR_CHECK(lengths[i] >= 1, "batched documents have at least one token");
    // An empty bin takes any document, however long: that is how an
    // oversize document gets a bin of its own instead of being dropped.
    const bool full = max_documents > 0 && open_documents == max_documents;
    if (bin < 0 || open_tokens + lengths[i] > budget || full) {
      ++bin;
      open_tokens = 0;
      open_documents = 0;
    }
    open_tokens += lengths[i];
    open_documents += 1;
    bin_of[i] = bin;
  }
  return bin_of;
}

std::vector<int64_t> first_fit(std::span<const int64_t> lengths, int64_t budget,
                               int64_t max_documents) {
  std::vector<int64_t> bin_of(lengths.size());
  std::vector<int64_t> room;  // per bin; -1 = takes nothing more
  std::vector<int64_t> documents;
  FirstFitTree tree;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t length = lengths[i];
    HR_CHECK(length >= 1, "batched documents have at least one token");
    int64_t bin = tree.first_with_room(length);
    if (bin < 0) {
      bin = tree.open_bin(-1);
      room.push_back(budget);
      documents.push_back(0);
    }
    const size_t b = static_cast<size_t>(bin);
    room[b] -= length;
    documents[b] += 1;
    const bool full = room[b] <= 0 || (max_documents > 0 && documents[b] == max_documents);
    tree.set(b, full ? -1 : room[b]);
    bin_of[i] = bin;
  }
  return bin_of;
}

std::vector<int64_t> auto_bucket_boundaries(std::span<const int64_t> lengths) {
  std::vector<int64_t> sorted;
  for (int64_t length : lengths)
    if (length > 0) sorted.push_back(length);
  if (sorted.empty()) return {};
  std::sort(sorted.begin(), sorted.end());
  const int64_t longest = sorted.back();
  const int64_t n = static_cast<int64_t>(sorted.size());

  // Candidate boundaries: the length at each of kAutoBucketQuantiles
  // quantiles (nearest rank), rounded up to 8 but not past the longest.
  // With few distinct lengths these are all of them; with many, a boundary
  // between two quantiles saves at most 1/kAutoBucketQuantiles of the rows
  // from the next one up, and the search stays O(buckets * candidates^2)
  // whatever the dataset's size.
  std::vector<int64_t> candidates;
  for (int64_t q = 1; q <= kAutoBucketQuantiles; ++q) {
    const int64_t rank = (n * q + kAutoBucketQuantiles - 1) / kAutoBucketQuantiles;
    const int64_t at = sorted[static_cast<size_t>(std::max<int64_t>(rank, 1) - 1)];
    const int64_t rounded = std::min(longest, (at + 7) / 8 * 8);
    if (candidates.empty() || rounded > candidates.back()) candidates.push_back(rounded);
  }
  // at_or_below[i]: documents of length <= candidates[i].
  const size_t c = candidates.size();
  std::vector<int64_t> at_or_below(c);
  for (size_t i = 0; i < c; ++i)
    at_or_below[i] = std::upper_bound(sorted.begin(), sorted.end(), candidates[i]) - sorted.begin();

  // Every document pads to its bucket's boundary, so the padding is least
  // where the padded tokens, sum over buckets of boundary * documents, are.
  // padded[k][i]: the least padded tokens of the documents <= candidates[i]
  // in k + 1 buckets, the last bounded by candidates[i]; from[k][i] the
  // previous boundary's index then (-1: none). The last boundary is the
  // longest, so every document has a bucket.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  const size_t buckets = std::min(static_cast<size_t>(kAutoBuckets), c);
  std::vector<std::vector<int64_t>> padded(buckets, std::vector<int64_t>(c, kNone));
  std::vector<std::vector<int64_t>> from(buckets, std::vector<int64_t>(c, -1));
  for (size_t i = 0; i < c; ++i)
    padded[0][i] = candidates[i] * at_or_below[i];
  for (size_t k = 1; k < buckets; ++k)
    for (size_t i = k; i < c; ++i)
      for (size_t p = k - 1; p < i; ++p) {
        if (padded[k - 1][p] == kNone) continue;
        const int64_t total = padded[k - 1][p] + candidates[i] * (at_or_below[i] - at_or_below[p]);
        if (total < padded[k][i]) {
          padded[k][i] = total;
          from[k][i] = static_cast<int64_t>(p);
        }
      }
  // Fewer buckets when more save nothing (the ties go to the fewer shapes).
  size_t best = 0;
  for (size_t k = 1; k < buckets; ++k)
    if (padded[k][c - 1] < padded[best][c - 1]) best = k;
  std::vector<int64_t> boundaries;
  for (int64_t i = static_cast<int64_t>(c - 1), k = static_cast<int64_t>(best); i >= 0; --k) {
    boundaries.push_back(candidates[static_cast<size_t>(i)]);
    i = k > 0 ? from[static_cast<size_t>(k)][static_cast<size_t>(i)] : -1;
  }
  std::reverse(boundaries.begin(), boundaries.end());
  return boundaries;
}

int64_t bucket_of(std::span<const int64_t> boundaries, int64_t length) {
  const auto it = std::lower_bound(boundaries.begin(), boundaries.end(), length);
  return it == boundaries.end() ? -1 : static_cast<int64_t>(it - boundaries.begin());
}

std::vector<std::vector<int64_t>> deal_by_cost(std::span<const int64_t> costs, int world_size) {
  HR_CHECK(world_size >= 1 && costs.size() % static_cast<size_t>(world_size) == 0,
           "a step holds world_size * grad_accum bins");
  const size_t ranks = static_cast<size_t>(world_size);
  std::vector<int64_t> by_cost(costs.size());
  std::iota(by_cost.begin(), by_cost.end(), 0);
  std::stable_sort(by_cost.begin(), by_cost.end(), [&costs](int64_t a, int64_t b) {
    return costs[static_cast<size_t>(a)] > costs[static_cast<size_t>(b)];
  });
  std::vector<std::vector<int64_t>> dealt(ranks);
  std::vector<int64_t> load(ranks, 0);
  std::vector<size_t> lightest(ranks);
  for (size_t round = 0; round * ranks < by_cost.size(); ++round) {
    std::iota(lightest.begin(), lightest.end(), 0);
    std::stable_sort(lightest.begin(), lightest.end(),
                     [&load](size_t a, size_t b) { return load[a] < load[b]; });
    for (size_t i = 0; i < ranks; ++i) {
      const int64_t bin = by_cost[round * ranks + i];
      dealt[lightest[i]].push_back(bin);
      load[lightest[i]] += costs[static_cast<size_t>(bin)];
    }
  }
  return dealt;
}

Batcher::Batcher(const TokenDataset& dataset, BatchOptions options)
    : dataset_(dataset), options_(options) {
  const std::string where = dataset.path() + ": batching: ";
  auto require = [&where](bool ok, const std::string& what) {
    if (!ok) throw UsageError(where + what);
  };
  const bool padded = options_.mode == BatchOptions::Mode::kPadded;
  const bool bucketed = !options_.buckets.empty() || options_.auto_buckets;
  // cu_seqlens and positions are int32 (what attention kernels take).
  require(
      options_.max_tokens_per_micro_batch >= 1 && options_.max_tokens_per_micro_batch <= kInt32Max,
      "max_tokens_per_micro_batch = " + std::to_string(options_.max_tokens_per_micro_batch) +
          " must be in [1, 2^31)");
  require(options_.grad_accum >= 1,
          "grad_accum = " + std::to_string(options_.grad_accum) + " must be >= 1");
  require(options_.max_sample_tokens >= 0,
          "max_sample_tokens = " + std::to_string(options_.max_sample_tokens) +
              " must be >= 0 (0 = never truncate)");
  require(!bucketed || padded,
          "buckets are for padded mode: packed bins have no padding to bucket");
  require(options_.pad_to_multiple_of >= 0 && options_.pad_to_multiple_of <= kInt32Max,
          "pad_to_multiple_of = " + std::to_string(options_.pad_to_multiple_of) +
              " must be in [0, 2^31) (0 = no padding)");
  require(!(options_.auto_buckets && !options_.buckets.empty()),
          "buckets are either \"auto\" or given, not both");
  for (size_t i = 0; i < options_.buckets.size(); ++i) {
    const int64_t b = options_.buckets[i];
    require(b >= 1 && b <= kInt32Max,
            "bucket boundary " + std::to_string(b) + " must be in [1, 2^31)");
    require(i == 0 || b > options_.buckets[i - 1],
            "bucket boundaries must increase: " + std::to_string(b) + " follows " +
                std::to_string(i > 0 ? options_.buckets[i - 1] : 0));
  }
  require(!bucketed || options_.seq_len == 0,
          "seq_len = " + std::to_string(options_.seq_len) +
              " pads every row to one length: it cannot be combined with buckets");
  const bool grouped = options_.group_pool > 0;
  require(options_.group_pool >= 0,
          "group_pool = " + std::to_string(options_.group_pool) + " must be >= 0 (0 = off)");
  require(!grouped || padded,
          "group_pool is for padded mode: packed bins have no padding to group away");
  require(!grouped || !bucketed, "group_pool and buckets are two ways to group lengths: use one");
  require(!grouped || options_.seq_len == 0,
          "seq_len = " + std::to_string(options_.seq_len) +
              " pads every row to one length: it cannot be combined with group_pool");
  const bool rows_required = padded && !bucketed && !grouped;
  require(options_.micro_batch_size >= (rows_required ? 1 : 0),
          "micro_batch_size = " + std::to_string(options_.micro_batch_size) +
              (rows_required         ? " must be >= 1 in padded mode"
               : bucketed || grouped ? " must be >= 0 (0 = no cap on rows)"
                                     : " must be >= 0 (0 = no cap)"));
  require(options_.packing_window >= 0,
          "packing_window = " + std::to_string(options_.packing_window) +
              " must be >= 0 (0 = the whole epoch)");
  require(options_.seq_len >= 0 && options_.seq_len <= kInt32Max,
          "seq_len = " + std::to_string(options_.seq_len) + " must be in [0, 2^31)");
  require(options_.pad_id >= 0, "pad_id = " + std::to_string(options_.pad_id) + " is not a token");
  require(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
          "rank " + std::to_string(options_.rank) + " of world_size " +
              std::to_string(options_.world_size) + " is not a rank");

  truncate_at_ = options_.max_sample_tokens;
  if (padded && options_.seq_len > 0)
    truncate_at_ = truncate_at_ > 0 ? std::min(truncate_at_, options_.seq_len) : options_.seq_len;
  if (options_.auto_buckets) {
    std::vector<int64_t> lengths(static_cast<size_t>(dataset.num_documents()));
    for (int64_t d = 0; d < dataset.num_documents(); ++d)
      lengths[static_cast<size_t>(d)] = batched_length(d);
    options_.buckets = auto_bucket_boundaries(lengths);
    options_.auto_buckets = false;
    // All documents empty: no buckets, and check_trainable says why below.
  }
  // max_sample_tokens > 0 allows truncation, so to the last bucket as well;
  // 0 never truncates, and a document past the last bucket is refused below.
  const int64_t last_bucket = options_.buckets.empty() ? 0 : options_.buckets.back();
  if (last_bucket > 0 && truncate_at_ > 0) truncate_at_ = std::min(truncate_at_, last_bucket);
  // Before planning: a corpus with nothing to learn would train at loss 0.
  dataset.check_trainable(truncate_at_);
  length_.resize(static_cast<size_t>(dataset.num_documents()));
  for (int64_t d = 0; d < dataset.num_documents(); ++d) {
    const int64_t length = batched_length(d);
    length_[static_cast<size_t>(d)] = length;
    if (length == 0) continue;
    if (last_bucket > 0 && length > last_bucket)
      throw UsageError(where + "document " + std::to_string(d) + " has " + std::to_string(length) +
                       " tokens, more than the last bucket (" + std::to_string(last_bucket) +
                       "): raise the last boundary of batch.buckets, or set "
                       "data.max_sample_tokens to truncate such documents to it");
    if (length > kInt32Max)
      throw UsageError(where + "document " + std::to_string(d) + " has " + std::to_string(length) +
                       " tokens; positions are int32: set data.max_sample_tokens");
    kept_.push_back(d);
  }
  if (kept_.empty()) throw UsageError(dataset.path() + ": no document has any tokens");
  plan_ = plan_epoch(0);
}

int64_t Batcher::batched_length(int64_t document) const {
  const int64_t length = dataset_.document_length(document);
  return truncate_at_ > 0 ? std::min(length, truncate_at_) : length;
}

std::vector<int64_t> visiting_order(std::span<const int64_t> kept, const BatchOptions& options,
                                    int64_t epoch) {
  std::vector<int64_t> order(kept.begin(), kept.end());
  if (!options.shuffle) return order;
  // Fisher-Yates with our own uniform_below: the same order on every machine
  // and standard library, which resuming on another node needs.
  std::mt19937_64 rng(data_detail::stream_seed(options.seed, static_cast<uint64_t>(epoch)));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(data_detail::uniform_below(rng, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

namespace {

// `width` rounded up to a multiple of pad_to_multiple_of (padded rows, and
// packed bins before their cap).
int64_t padded_row_width(int64_t width, const BatchOptions& options) {
  const int64_t m = options.pad_to_multiple_of;
  return m > 0 ? (width + m - 1) / m * m : width;
}

// make_bins for padded mode with buckets (the header comment's rules).
EpochBins bucketed_bins(const std::vector<int64_t>& visit, std::span<const int64_t> length,
                        const BatchOptions& options, int64_t epoch) {
  const std::vector<int64_t>& bounds = options.buckets;
  const size_t k = bounds.size();
  std::vector<std::vector<int64_t>> members(k);
  for (int64_t d : visit) {
    const int64_t b = bucket_of(bounds, length[static_cast<size_t>(d)]);
    HR_CHECK(b >= 0, "batched documents fit the last bucket");
    members[static_cast<size_t>(b)].push_back(d);
  }
  std::vector<int64_t> rows(k), total(k), left(k);
  std::vector<size_t> next(k, 0);
  int64_t all_left = 0;
  for (size_t b = 0; b < k; ++b) {
    rows[b] = std::max<int64_t>(
        1, options.max_tokens_per_micro_batch / padded_row_width(bounds[b], options));
    if (options.micro_batch_size > 0) rows[b] = std::min(rows[b], options.micro_batch_size);
    const int64_t count = static_cast<int64_t>(members[b].size());
    total[b] = left[b] = (count + rows[b] - 1) / rows[b];
    all_left += left[b];
  }
  // A stream of its own, so the interleaving does not disturb the order.
  std::mt19937_64 rng(data_detail::stream_seed(
      data_detail::stream_seed(options.seed, static_cast<uint64_t>(epoch)), 0x6275636b6574ull));
  EpochBins bins;
  bins.bin_starts.push_back(0);
  bins.order.reserve(visit.size());
  for (; all_left > 0; --all_left) {
    size_t pick = 0;
    if (options.shuffle) {
      int64_t r =
          static_cast<int64_t>(data_detail::uniform_below(rng, static_cast<uint64_t>(all_left)));
      while (r >= left[pick])
        r -= left[pick++];
    } else {
      // The largest share left (left / total), the smallest bucket on ties;
      // a bucket with nothing left (or never anything) is never picked.
      while (left[pick] == 0)
        ++pick;
      for (size_t b = pick + 1; b < k; ++b)
        if (left[b] > 0 && left[b] * total[pick] > left[pick] * total[b]) pick = b;
    }
    const std::vector<int64_t>& docs = members[pick];
    HR_CHECK(left[pick] > 0, "a drawn bucket has micro-batches left");
    const size_t first = next[pick];
    const size_t last = std::min(docs.size(), first + static_cast<size_t>(rows[pick]));
    int64_t width = bounds[pick];
    if (options.pad_to == BatchOptions::PadTo::kLongest) {
      width = 0;
      for (size_t i = first; i < last; ++i)
        width = std::max(width, length[static_cast<size_t>(docs[i])]);
    }
    width = padded_row_width(width, options);
    bins.order.insert(bins.order.end(), docs.begin() + static_cast<std::ptrdiff_t>(first),
                      docs.begin() + static_cast<std::ptrdiff_t>(last));
    bins.bin_starts.push_back(static_cast<int64_t>(bins.order.size()));
    bins.bin_cost.push_back(static_cast<int64_t>(last - first) * width);
    bins.bin_bucket.push_back(static_cast<int64_t>(pick));
    next[pick] = last;
    left[pick] -= 1;
  }
  return bins;
}

// make_bins for padded mode with group_pool (the header comment's rules).
EpochBins grouped_bins(std::vector<int64_t> visit, std::span<const int64_t> length,
                       const BatchOptions& options, int64_t epoch) {
  auto length_of = [&length](int64_t d) { return length[static_cast<size_t>(d)]; };
  const int64_t budget = options.max_tokens_per_micro_batch;
  // Saturating: a pool of more tokens than int64 holds is the whole epoch.
  const int64_t pool_tokens = options.group_pool > std::numeric_limits<int64_t>::max() / budget
                                  ? std::numeric_limits<int64_t>::max()
                                  : options.group_pool * budget;
  // Pass 1: the pools, each sorted longest first and cut into micro-batches
  // (bins in pool order: `starts` into `visit`, `cost`, `pool`).
  std::vector<int64_t> starts{0}, cost, pool;
  const size_t n = visit.size();
  int64_t left = 0;  // tokens of the rows not yet in a pool
  for (int64_t d : visit)
    left += padded_row_width(length_of(d), options);
  for (size_t first = 0; first < n;) {
    size_t last = first;
    for (int64_t tokens = 0; last < n && tokens < pool_tokens; ++last) {
      const int64_t row = padded_row_width(length_of(visit[last]), options);
      tokens += row;
      left -= row;
    }
    // A rest worth less than half a pool joins this one: a small pool sorts
    // too few lengths together to pad little.
    if (left < pool_tokens / 2) last = n;
    const auto begin = visit.begin() + static_cast<std::ptrdiff_t>(first);
    const auto end = visit.begin() + static_cast<std::ptrdiff_t>(last);
    std::stable_sort(begin, end,
                     [&length_of](int64_t a, int64_t b) { return length_of(a) > length_of(b); });
    for (size_t i = first; i < last;) {
      const int64_t width = padded_row_width(length_of(visit[i]), options);
      int64_t rows = std::max<int64_t>(1, budget / width);
      if (options.micro_batch_size > 0) rows = std::min(rows, options.micro_batch_size);
      const size_t stop = std::min(last, i + static_cast<size_t>(rows));
      starts.push_back(static_cast<int64_t>(stop));
      cost.push_back(static_cast<int64_t>(stop - i) * width);
      pool.push_back(static_cast<int64_t>(pool.empty() ? 0 : pool.back() + (i == first)));
      i = stop;
    }
    first = last;
  }
  // Pass 2: the bins in a shuffled order (a stream of its own, so the
  // visiting order is not disturbed), or pool after pool without shuffle.
  std::vector<size_t> take(cost.size());
  std::iota(take.begin(), take.end(), size_t{0});
  if (options.shuffle) {
    std::mt19937_64 rng(data_detail::stream_seed(
        data_detail::stream_seed(options.seed, static_cast<uint64_t>(epoch)), 0x706f6f6cull));
    for (size_t i = take.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(data_detail::uniform_below(rng, i));
      std::swap(take[i - 1], take[j]);
    }
  }
  EpochBins bins;
  bins.bin_starts.push_back(0);
  bins.order.reserve(n);
  for (size_t b : take) {
    bins.order.insert(bins.order.end(), visit.begin() + starts[b], visit.begin() + starts[b + 1]);
    bins.bin_starts.push_back(static_cast<int64_t>(bins.order.size()));
    bins.bin_cost.push_back(cost[b]);
    bins.bin_pool.push_back(pool[b]);
  }
  return bins;
}

// A packed bin of `fill` tokens with its padding (the header comment).
int64_t padded_bin_tokens(int64_t fill, const BatchOptions& options) {
  if (options.pad_to_multiple_of <= 0) return fill;
  return std::min(padded_row_width(fill, options),
                  std::max(fill, options.max_tokens_per_micro_batch));
}

}  // namespace

EpochBins make_bins(std::vector<int64_t> visit, std::span<const int64_t> length,
                    const BatchOptions& options, int64_t epoch) {
  auto length_of = [&length](int64_t d) { return length[static_cast<size_t>(d)]; };
  const bool padded = options.mode == BatchOptions::Mode::kPadded;
  if (padded && !options.buckets.empty()) return bucketed_bins(visit, length, options, epoch);
  if (padded && options.group_pool > 0)
    return grouped_bins(std::move(visit), length, options, epoch);
  EpochBins bins;
  bins.bin_starts.push_back(0);
  const size_t n = visit.size();
  if (padded) {
    bins.order = std::move(visit);
    const size_t rows = static_cast<size_t>(options.micro_batch_size);
    for (size_t start = 0; start < n; start += rows) {
      const size_t end = std::min(n, start + rows);
      int64_t width = options.seq_len;
      if (width == 0)
        for (size_t k = start; k < end; ++k)
          width = std::max(width, length_of(bins.order[k]));
      width = padded_row_width(width, options);
      bins.bin_starts.push_back(static_cast<int64_t>(end));
      bins.bin_cost.push_back(static_cast<int64_t>(end - start) * width);
    }
    return bins;
  }

  const size_t window = options.packing_window > 0 ? static_cast<size_t>(options.packing_window)
                                                   : std::max<size_t>(n, 1);
  bins.order.resize(n);
  std::vector<int64_t> lengths;
  std::vector<int64_t> fill;
  std::vector<int64_t> starts;
  for (size_t w0 = 0; w0 < n; w0 += window) {
    const auto first = visit.begin() + static_cast<std::ptrdiff_t>(w0);
    const auto last = visit.begin() + static_cast<std::ptrdiff_t>(std::min(n, w0 + window));
    if (options.packing == BatchOptions::Packing::kFirstFitDecreasing)
      std::stable_sort(first, last,
                       [&length_of](int64_t a, int64_t b) { return length_of(a) > length_of(b); });
    lengths.clear();
    for (auto it = first; it != last; ++it)
      lengths.push_back(length_of(*it));
    const std::vector<int64_t> bin_of =
        options.packing == BatchOptions::Packing::kNextFit
            ? next_fit(lengths, options.max_tokens_per_micro_batch, options.micro_batch_size)
            : first_fit(lengths, options.max_tokens_per_micro_batch, options.micro_batch_size);
    // Documents grouped by bin (a counting sort): bins in the order they
    // opened, documents within a bin in the order they joined it.
    const size_t count =
        bin_of.empty() ? 0
                       : static_cast<size_t>(*std::max_element(bin_of.begin(), bin_of.end())) + 1;
    starts.assign(count + 1, 0);
    fill.assign(count, 0);
    for (size_t i = 0; i < bin_of.size(); ++i) {
      starts[static_cast<size_t>(bin_of[i]) + 1] += 1;
      fill[static_cast<size_t>(bin_of[i])] += lengths[i];
    }
    std::partial_sum(starts.begin(), starts.end(), starts.begin());
    for (size_t b = 0; b < count; ++b) {
      bins.bin_starts.push_back(static_cast<int64_t>(w0) + starts[b + 1]);
      bins.bin_cost.push_back(padded_bin_tokens(fill[b], options));
    }
    for (size_t i = 0; i < bin_of.size(); ++i)
      bins.order[w0 + static_cast<size_t>(starts[static_cast<size_t>(bin_of[i])]++)] =
          *(first + static_cast<std::ptrdiff_t>(i));
  }
  return bins;
}

std::shared_ptr<const Batcher::EpochPlan> Batcher::plan_epoch(int64_t epoch) const {
  auto plan = std::make_shared<EpochPlan>();
  static_cast<EpochBins&>(*plan) =
      make_bins(visiting_order(kept_, options_, epoch), length_, options_, epoch);
  plan->epoch = epoch;
  return plan;
}

MicroBatchPlan Batcher::describe(const EpochPlan& plan, int64_t bin) const {
  MicroBatchPlan mb;
  mb.epoch = plan.epoch;
  mb.bin = bin;
  const size_t first = static_cast<size_t>(plan.bin_starts[static_cast<size_t>(bin)]);
  const size_t last = static_cast<size_t>(plan.bin_starts[static_cast<size_t>(bin) + 1]);
  mb.documents.assign(plan.order.begin() + static_cast<std::ptrdiff_t>(first),
                      plan.order.begin() + static_cast<std::ptrdiff_t>(last));
  int64_t real = 0;
  for (int64_t d : mb.documents) {
    const int64_t length = batched_length(d);
    real += length;
    mb.longest = std::max(mb.longest, length);
    mb.truncated += length < dataset_.document_length(d);
  }
  mb.tokens = plan.bin_cost[static_cast<size_t>(bin)];
  mb.padding = mb.tokens - real;
  if (!plan.bin_bucket.empty()) mb.bucket = plan.bin_bucket[static_cast<size_t>(bin)];
  if (!plan.bin_pool.empty()) mb.pool = plan.bin_pool[static_cast<size_t>(bin)];
  // Every row of a padded bin is equally long: its cost is rows x width.
  if (options_.mode == BatchOptions::Mode::kPadded)
    mb.width = mb.tokens / static_cast<int64_t>(mb.documents.size());
  return mb;
}

Batch Batcher::build(const MicroBatchPlan& mb) const {
  if (mb.tokens > kInt32Max)
    throw UsageError(dataset_.path() + ": micro-batch " + std::to_string(mb.bin) + " of epoch " +
                     std::to_string(mb.epoch) + " has " + std::to_string(mb.tokens) +
                     " tokens; cu_seqlens are int32: lower the batch size or set "
                     "data.max_sample_tokens");
  const bool padded = options_.mode == BatchOptions::Mode::kPadded;
  const int64_t width = padded ? mb.width : 0;
  Batch batch;
  batch.epoch = mb.epoch;
  batch.bin = mb.bin;
  batch.tokens.reserve(static_cast<size_t>(mb.tokens));
  batch.targets.reserve(static_cast<size_t>(mb.tokens));
  batch.positions.reserve(static_cast<size_t>(mb.tokens));
  batch.cu_seqlens.reserve(mb.documents.size() + 1);
  batch.cu_seqlens.push_back(0);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (int64_t document : mb.documents) {
    dataset_.read_document(document, tokens, mask, truncate_at_);
    const int64_t length = static_cast<int64_t>(tokens.size());
    append_document(batch, tokens.data(), length, mask.empty() ? nullptr : mask.data());
    if (padded) append_padding(batch, width - length, options_.pad_id);
    if (length < dataset_.document_length(document)) batch.truncated += 1;
  }
  if (!padded) append_padding_segment(batch, mb.padding, options_.pad_id);
  HR_CHECK(batch.size() == mb.tokens && batch.padding == mb.padding,
           "a built micro-batch matches its plan");
  return batch;
}

std::vector<std::vector<MicroBatchPlan>> Batcher::next_step_plan() {
  const size_t step_bins = static_cast<size_t>(options_.world_size) * options_.grad_accum;
  std::vector<std::pair<std::shared_ptr<const EpochPlan>, int64_t>> bins;
  std::vector<int64_t> costs;
  bins.reserve(step_bins);
  costs.reserve(step_bins);
  for (size_t j = 0; j < step_bins; ++j) {
    bins.emplace_back(plan_, cursor_.position);
    costs.push_back(plan_->bin_cost[static_cast<size_t>(cursor_.position)]);
    cursor_.position += 1;
    if (cursor_.position == plan_->num_bins()) {
      cursor_ = Cursor{cursor_.epoch + 1, 0};
      plan_ = plan_epoch(cursor_.epoch);
    }
  }
  const std::vector<std::vector<int64_t>> dealt = deal_by_cost(costs, options_.world_size);
  std::vector<std::vector<MicroBatchPlan>> step(dealt.size());
  for (size_t r = 0; r < dealt.size(); ++r)
    for (int64_t j : dealt[r]) {
      const auto& [plan, bin] = bins[static_cast<size_t>(j)];
      step[r].push_back(describe(*plan, bin));
    }
  return step;
}

std::vector<Batch> Batcher::next_step() {
  const std::vector<std::vector<MicroBatchPlan>> step = next_step_plan();
  std::vector<Batch> batches;
  batches.reserve(static_cast<size_t>(options_.grad_accum));
  for (const MicroBatchPlan& mb : step[static_cast<size_t>(options_.rank)])
    batches.push_back(build(mb));
  return batches;
}

void Batcher::set_cursor(Cursor cursor) {
  if (cursor.epoch < 0 || cursor.position < 0)
    throw UsageError(dataset_.path() + ": data cursor (epoch " + std::to_string(cursor.epoch) +
                     ", position " + std::to_string(cursor.position) + ") is negative");
  std::shared_ptr<const EpochPlan> plan =
      cursor.epoch == plan_->epoch ? plan_ : plan_epoch(cursor.epoch);
  if (cursor.position >= plan->num_bins())
    throw UsageError(dataset_.path() + ": data cursor (epoch " + std::to_string(cursor.epoch) +
                     ", position " + std::to_string(cursor.position) + ") is past the " +
                     std::to_string(plan->num_bins()) +
                     " micro-batches of that epoch: the dataset or the batch options changed "
                     "since the checkpoint");
  plan_ = std::move(plan);
  cursor_ = cursor;
}

std::vector<std::vector<int64_t>> Batcher::epoch_bins(int64_t epoch) const {
  HR_CHECK(epoch >= 0, "epochs count from 0");
  const std::shared_ptr<const EpochPlan> plan = epoch == plan_->epoch ? plan_ : plan_epoch(epoch);
  std::vector<std::vector<int64_t>> bins(static_cast<size_t>(plan->num_bins()));
  for (size_t b = 0; b < bins.size(); ++b)
    bins[b].assign(plan->order.begin() + plan->bin_starts[b],
                   plan->order.begin() + plan->bin_starts[b + 1]);
  return bins;
}

}  // namespace headroom
