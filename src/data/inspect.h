// `headroom data inspect` as library code: what a token dataset holds —
// documents, tokens, length percentiles and histogram, vocab usage, loss-mask
// coverage and attributes. The CLI (src/cli/data_inspect.cc) prints it as
// text or JSON.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_dataset.h"

namespace headroom {

// Documents with lengths in [min, max] tokens.
struct LengthBucket {
  int64_t min = 0;
  int64_t max = 0;
  int64_t documents = 0;
};

struct DatasetInspection {
  // The percentiles of length_percentiles, in order.
  static constexpr std::array<int, 5> kPercentiles = {0, 50, 90, 99, 100};

  std::string path;
  int64_t documents = 0;
  int64_t tokens = 0;
  // Nearest-rank percentiles of the document lengths (kPercentiles), and
  // the mean; 0 for a dataset without documents.
  std::array<int64_t, kPercentiles.size()> length_percentiles{};
  double mean_length = 0.0;
  // Power-of-two buckets [2^k, 2^(k+1) - 1] from the shortest document's to
  // the longest's, empty ones included; empty documents get a bucket [0, 0]
  // of their own, first.
  std::vector<LengthBucket> length_histogram;
  // batch.buckets = "auto" over these lengths (auto_bucket_boundaries in
  // data/batcher.h, before any max_sample_tokens), what padded micro-batches
  // padded to the bucket would waste with them, and the same for one bucket
  // of the longest length (plain padding to the longest there is).
  std::vector<int64_t> suggested_buckets;
  std::vector<int64_t> suggested_bucket_documents;  // per suggested bucket
  // Per suggested bucket: padding / padded tokens, rows padded to the
  // bucket (0 for a bucket without documents).
  std::vector<double> suggested_bucket_padding_fractions;
  double bucketed_padding_fraction = 0.0;    // padding / padded tokens, rows padded to the bucket
  double unbucketed_padding_fraction = 0.0;  // every row padded to the longest document
  int64_t vocab_distinct = 0;                // distinct ids in /tokens
  double vocab_fraction = 0.0;               // vocab_distinct / vocab_size (0 for vocab_size 0)
  bool has_loss_mask = false;
  // Tokens that are targets: those with loss_mask 1, or every token when the
  // file has no /loss_mask; coverage = targets / tokens (1 without a mask, 0
  // for a masked dataset of no tokens).
  int64_t targets = 0;
  double coverage = 1.0;
  TokenDatasetAttributes attributes;
};

// Opens `path` (TokenDataset::open's checks; its UsageErrors name the file)
// and reads it once. Memory: the lengths (8 bytes per document), the longest
// document and one bit per vocab id — never the whole file.
DatasetInspection inspect_dataset(const std::string& path);

}  // namespace headroom
