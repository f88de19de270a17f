// `headroom data inspect FILE.h5 [--json]`: what a token dataset holds, as
// inspect_dataset() (data/inspect.h) finds it, printed as text or JSON.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/inspect.h"
#include "data_tools.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

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

  const DatasetInspection r = inspect_dataset(path);
  const TokenDatasetAttributes& attrs = r.attributes;
  const auto& kPercentiles = DatasetInspection::kPercentiles;

  if (json) {
    nlohmann::ordered_json j;
    j["path"] = path;
    j["documents"] = r.documents;
    j["tokens"] = r.tokens;
    nlohmann::ordered_json p;
    for (size_t i = 0; i < kPercentiles.size(); ++i)
      p["p" + std::to_string(kPercentiles[i])] = r.length_percentiles[i];
    p["mean"] = r.mean_length;
    j["lengths"] = p;
    j["length_histogram"] = nlohmann::ordered_json::array();
    for (const LengthBucket& b : r.length_histogram)
      j["length_histogram"].push_back({{"min", b.min}, {"max", b.max}, {"documents", b.documents}});
    j["suggested_buckets"] = {{"boundaries", r.suggested_buckets},
                              {"documents", r.suggested_bucket_documents},
                              {"padding_fraction", r.bucketed_padding_fraction},
                              {"padding_fractions", r.suggested_bucket_padding_fractions},
                              {"padding_fraction_unbucketed", r.unbucketed_padding_fraction}};
    j["vocab"] = {
        {"size", attrs.vocab_size}, {"distinct", r.vocab_distinct}, {"fraction", r.vocab_fraction}};
    j["loss_mask"] = {
        {"present", r.has_loss_mask}, {"targets_kept", r.targets}, {"coverage", r.coverage}};
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
  std::printf("  documents  %lld\n", static_cast<long long>(r.documents));
  std::printf("  tokens     %lld\n", static_cast<long long>(r.tokens));
  std::printf("  length (tokens):");
  for (size_t i = 0; i < kPercentiles.size(); ++i)
    std::printf(" p%d %lld", kPercentiles[i], static_cast<long long>(r.length_percentiles[i]));
  std::printf("\n");
  int64_t most = 0;
  for (const LengthBucket& b : r.length_histogram)
    most = std::max(most, b.documents);
  for (const LengthBucket& b : r.length_histogram) {
    const int width = most ? static_cast<int>((b.documents * 40 + most - 1) / most) : 0;
    std::printf("    %8lld-%-8lld %8lld  %s\n", static_cast<long long>(b.min),
                static_cast<long long>(b.max), static_cast<long long>(b.documents),
                std::string(static_cast<size_t>(width), '#').c_str());
  }
  if (!r.suggested_buckets.empty()) {
    std::string boundaries, counts;
    for (size_t i = 0; i < r.suggested_buckets.size(); ++i) {
      boundaries += (i ? ", " : "") + std::to_string(r.suggested_buckets[i]);
      counts += (i ? ", " : "") + std::to_string(r.suggested_bucket_documents[i]);
    }
    std::printf("  buckets    batch.buckets = [%s] (\"auto\": the least padding in 5)\n",
                boundaries.c_str());
    std::printf(
        "             documents per bucket %s; padded rows waste %.1f%% (%.1f%% all "
        "padded to the longest)\n",
        counts.c_str(), 100.0 * r.bucketed_padding_fraction, 100.0 * r.unbucketed_padding_fraction);
    std::string shares;
    for (size_t i = 0; i < r.suggested_bucket_padding_fractions.size(); ++i) {
      char share[32];
      std::snprintf(share, sizeof share, "%s%.1f%%", i ? ", " : "",
                    100.0 * r.suggested_bucket_padding_fractions[i]);
      shares += share;
    }
    std::printf("             padding per bucket %s\n", shares.c_str());
  }
  std::printf("  vocab      %lld of %lld ids used (%.1f%%)\n",
              static_cast<long long>(r.vocab_distinct), static_cast<long long>(attrs.vocab_size),
              100.0 * r.vocab_fraction);
  if (r.has_loss_mask)
    std::printf("  loss_mask  %lld of %lld tokens are targets (%.2f%%)\n",
                static_cast<long long>(r.targets), static_cast<long long>(r.tokens),
                100.0 * r.coverage);
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
