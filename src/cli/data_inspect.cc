// `headroom data inspect FILE.h5 [--json]`: what a token dataset holds.
//
// Lengths come from /offsets (already in memory, 8 bytes per document); the
// token pass (vocab usage, loss-mask coverage) streams one document at a
// time, so memory is the longest document plus one byte per vocab id —
// never the whole file.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/token_dataset.h"
#include "data_tools.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

namespace {

struct Bucket {  // lengths in [min, max]
  int64_t min = 0;
  int64_t max = 0;
  int64_t documents = 0;
};

// Nearest-rank percentile of sorted lengths.
int64_t percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  const size_t rank = (static_cast<size_t>(p) * n + 99) / 100;
  return sorted[rank == 0 ? 0 : rank - 1];
}

// Power-of-two buckets [2^k, 2^(k+1) - 1] from the shortest document's to the
// longest's; empty documents get a bucket [0, 0] of their own.
std::vector<Bucket> length_histogram(const std::vector<int64_t>& sorted) {
  std::vector<Bucket> buckets;
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

int data_inspect(const std::vector<std::string>& args) {
  std::string path;
  bool json = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")("json", po::bool_switch(&json),
                                                     "print the same as one JSON object");
  po::options_description hidden;
  hidden.add_options()("file", po::value<std::string>(&path));
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_data_options("inspect",
                          "usage: headroom data inspect FILE.h5 [--json]\n\n"
                          "Documents, tokens, length percentiles and histogram, vocab usage,\n"
                          "loss-mask coverage and attributes of a token dataset.\n",
                          args, visible, hidden, positional, vm))
    return 0;
  if (path.empty()) throw UsageError("missing FILE.h5 (see headroom data inspect --help)");

  const TokenDataset dataset = TokenDataset::open(path, 0);
  const TokenDatasetAttributes& attrs = dataset.attributes();
  const int64_t num_documents = dataset.num_documents();

  std::vector<int64_t> lengths(static_cast<size_t>(num_documents));
  for (int64_t d = 0; d < num_documents; ++d)
    lengths[static_cast<size_t>(d)] = dataset.document_length(d);
  std::sort(lengths.begin(), lengths.end());
  const std::vector<Bucket> histogram = length_histogram(lengths);

  // One bit per id: the file's vocab_size is at most 2^31 (open() checks), so
  // at most 256 MiB even for a file that claims a vocabulary that large.
  std::vector<bool> seen(static_cast<size_t>(attrs.vocab_size), false);
  int64_t distinct = 0, mask_ones = 0;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (int64_t d = 0; d < num_documents; ++d) {
    dataset.read_document(d, tokens, mask);
    for (int32_t t : tokens) {
      auto s = seen[static_cast<size_t>(t)];  // open() checked t < vocab_size
      distinct += !s;
      s = true;
    }
    for (uint8_t m : mask)
      mask_ones += m != 0;
  }
  const int64_t num_tokens = dataset.num_tokens();
  const double vocab_fraction =
      attrs.vocab_size ? static_cast<double>(distinct) / static_cast<double>(attrs.vocab_size) : 0;
  const double coverage =
      num_tokens ? static_cast<double>(mask_ones) / static_cast<double>(num_tokens) : 0;
  static constexpr int kPercentiles[] = {0, 50, 90, 99, 100};

  if (json) {
    nlohmann::ordered_json j;
    j["path"] = path;
    j["documents"] = num_documents;
    j["tokens"] = num_tokens;
    nlohmann::ordered_json p;
    for (int q : kPercentiles)
      p["p" + std::to_string(q)] = percentile(lengths, q);
    p["mean"] =
        num_documents ? static_cast<double>(num_tokens) / static_cast<double>(num_documents) : 0.0;
    j["lengths"] = p;
    j["length_histogram"] = nlohmann::ordered_json::array();
    for (const Bucket& b : histogram)
      j["length_histogram"].push_back({{"min", b.min}, {"max", b.max}, {"documents", b.documents}});
    j["vocab"] = {{"size", attrs.vocab_size}, {"distinct", distinct}, {"fraction", vocab_fraction}};
    j["loss_mask"] = {{"present", dataset.has_loss_mask()},
                      {"targets_kept", dataset.has_loss_mask() ? mask_ones : num_tokens},
                      {"coverage", dataset.has_loss_mask() ? coverage : 1.0}};
    nlohmann::ordered_json a;
    a["format_version"] = attrs.format_version;
    a["vocab_size"] = attrs.vocab_size;
    a["eos_id"] = attrs.eos_id;
    a["bos_id"] = attrs.bos_id;
    a["tokenizer"] = attrs.tokenizer;
    a["created_by"] = attrs.created_by;
    a["source_entropy_nats"] = attrs.source_entropy_nats
                                   ? nlohmann::ordered_json(*attrs.source_entropy_nats)
                                   : nlohmann::ordered_json(nullptr);
    j["attributes"] = a;
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::printf("%s\n", path.c_str());
  std::printf("  documents  %lld\n", static_cast<long long>(num_documents));
  std::printf("  tokens     %lld\n", static_cast<long long>(num_tokens));
  std::printf("  length (tokens):");
  for (int q : kPercentiles)
    std::printf(" p%d %lld", q, static_cast<long long>(percentile(lengths, q)));
  std::printf("\n");
  int64_t most = 0;
  for (const Bucket& b : histogram)
    most = std::max(most, b.documents);
  for (const Bucket& b : histogram) {
    const int width = most ? static_cast<int>((b.documents * 40 + most - 1) / most) : 0;
    std::printf("    %8lld-%-8lld %8lld  %s\n", static_cast<long long>(b.min),
                static_cast<long long>(b.max), static_cast<long long>(b.documents),
                std::string(static_cast<size_t>(width), '#').c_str());
  }
  std::printf("  vocab      %lld of %lld ids used (%.1f%%)\n", static_cast<long long>(distinct),
              static_cast<long long>(attrs.vocab_size), 100.0 * vocab_fraction);
  if (dataset.has_loss_mask())
    std::printf("  loss_mask  %lld of %lld tokens are targets (%.2f%%)\n",
                static_cast<long long>(mask_ones), static_cast<long long>(num_tokens),
                100.0 * coverage);
  else
    std::printf("  loss_mask  none (every token is a target)\n");
  std::printf("  attributes\n");
  std::printf("    format_version       %lld\n", static_cast<long long>(attrs.format_version));
  std::printf("    vocab_size           %lld\n", static_cast<long long>(attrs.vocab_size));
  std::printf("    eos_id               %lld\n", static_cast<long long>(attrs.eos_id));
  std::printf("    bos_id               %lld\n", static_cast<long long>(attrs.bos_id));
  std::printf("    tokenizer            %s\n", attrs.tokenizer.c_str());
  std::printf("    created_by           %s\n", attrs.created_by.c_str());
  if (attrs.source_entropy_nats)
    std::printf("    source_entropy_nats  %.6f\n", *attrs.source_entropy_nats);
  else
    std::printf("    source_entropy_nats  (absent)\n");
  return 0;
}

}  // namespace headroom
