#include "data/inspect.h"

#include "data/batcher.h"

#include <algorithm>

namespace headroom {

namespace {

// Nearest-rank percentile of sorted lengths.
int64_t percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  const size_t rank = (static_cast<size_t>(p) * n + 99) / 100;
  return sorted[rank == 0 ? 0 : rank - 1];
}

// Power-of-two buckets [2^k, 2^(k+1) - 1] from the shortest document's to the
// longest's; empty documents get a bucket [0, 0] of their own.
std::vector<LengthBucket> length_histogram(const std::vector<int64_t>& sorted) {
  std::vector<LengthBucket> buckets;
  if (sorted.empty()) return buckets;
  auto bucket_of = [](int64_t length) {
    int k = 0;
    while ((int64_t{2} << k) <= length)
      ++k;
    return k;
  };
  int64_t empty = std::count(sorted.begin(), sorted.end(), 0);
  if (empty) buckets.push_back({0, 0, empty});
  if (sorted.back() == 0) return buckets;
  const int first = bucket_of(std::max<int64_t>(sorted[static_cast<size_t>(empty)], 1));
  const int last = bucket_of(sorted.back());
  const size_t offset = buckets.size();
  for (int k = first; k <= last; ++k)
    buckets.push_back({int64_t{1} << k, (int64_t{2} << k) - 1, 0});
  for (int64_t length : sorted)
    if (length > 0) ++buckets[offset + static_cast<size_t>(bucket_of(length) - first)].documents;
  return buckets;
}

}  // namespace

DatasetInspection inspect_dataset(const std::string& path) {
  const TokenDataset dataset = TokenDataset::open(path, 0);
  DatasetInspection r;
  r.path = path;
  r.attributes = dataset.attributes();
  r.documents = dataset.num_documents();
  r.tokens = dataset.num_tokens();
  r.has_loss_mask = dataset.has_loss_mask();

  // Lengths come from /offsets, already in memory.
  std::vector<int64_t> lengths(static_cast<size_t>(r.documents));
  for (int64_t d = 0; d < r.documents; ++d)
    lengths[static_cast<size_t>(d)] = dataset.document_length(d);
  std::sort(lengths.begin(), lengths.end());
  for (size_t i = 0; i < DatasetInspection::kPercentiles.size(); ++i)
    r.length_percentiles[i] = percentile(lengths, DatasetInspection::kPercentiles[i]);
  r.mean_length =
      r.documents ? static_cast<double>(r.tokens) / static_cast<double>(r.documents) : 0.0;
  r.length_histogram = length_histogram(lengths);
  r.suggested_buckets = auto_bucket_boundaries(lengths);
  r.suggested_bucket_documents.assign(r.suggested_buckets.size(), 0);
  int64_t bucketed_tokens = 0;
  std::vector<int64_t> bucket_real(r.suggested_buckets.size(), 0);
  for (int64_t length : lengths) {
    const int64_t bucket = bucket_of(r.suggested_buckets, length);
    if (length == 0 || bucket < 0) continue;
    ++r.suggested_bucket_documents[static_cast<size_t>(bucket)];
    bucket_real[static_cast<size_t>(bucket)] += length;
    bucketed_tokens += r.suggested_buckets[static_cast<size_t>(bucket)];
  }
  r.suggested_bucket_padding_fractions.assign(r.suggested_buckets.size(), 0.0);
  for (size_t b = 0; b < r.suggested_buckets.size(); ++b) {
    const int64_t padded = r.suggested_bucket_documents[b] * r.suggested_buckets[b];
    if (padded > 0)
      r.suggested_bucket_padding_fractions[b] =
          1.0 - static_cast<double>(bucket_real[b]) / static_cast<double>(padded);
  }
  if (bucketed_tokens > 0) {
    r.bucketed_padding_fraction =
        1.0 - static_cast<double>(r.tokens) / static_cast<double>(bucketed_tokens);
    r.unbucketed_padding_fraction =
        1.0 - static_cast<double>(r.tokens) /
                  static_cast<double>(lengths.back() * static_cast<int64_t>(lengths.size()));
  }

  // The token pass streams one document at a time. One bit per id: the
  // file's vocab_size is at most 2^31 (open() checks), so at most 256 MiB
  // even for a file that claims a vocabulary that large.
  std::vector<bool> seen(static_cast<size_t>(r.attributes.vocab_size), false);
  int64_t distinct = 0, mask_ones = 0;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (int64_t d = 0; d < r.documents; ++d) {
    dataset.read_document(d, tokens, mask);
    for (int32_t t : tokens) {
      auto s = seen[static_cast<size_t>(t)];  // open() checked t < vocab_size
      distinct += !s;
      s = true;
    }
    for (uint8_t m : mask)
      mask_ones += m != 0;
  }
  r.vocab_distinct = distinct;
  r.vocab_fraction = r.attributes.vocab_size ? static_cast<double>(distinct) /
                                                   static_cast<double>(r.attributes.vocab_size)
                                             : 0;
  if (r.has_loss_mask) {
    r.targets = mask_ones;
    r.coverage = r.tokens ? static_cast<double>(mask_ones) / static_cast<double>(r.tokens) : 0;
  } else {
    r.targets = r.tokens;
    r.coverage = 1.0;
  }
  return r;
}

}  // namespace headroom
