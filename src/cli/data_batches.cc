// `headroom data batches [EXP.toml]`: the micro-batches an experiment's first
// steps would train on, per rank (list_batches(), data/batches.h), from the
// same Batcher a run builds. This file turns the experiment into the
// Batcher's options and prints the listing.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/batches.h"
#include "data/token_dataset.h"
#include "data_tools.h"
#include "embedded_quickstart.h"
#include "model/model_config.h"
#include "train/config_options.h"
#include "util/error.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace headroom {

namespace {

constexpr int64_t kDefaultMaxSteps = 20;
// Bounds of the flags: the tool prints every micro-batch of every step, so
// past these the output is a mistake that would run for hours. Ranks: the
// same bound as `plan --world-size`.
constexpr int64_t kMaxSteps = 100'000;
constexpr int kMaxWorldSize = 1024;

// "512, 1024, 2048"
std::string join_boundaries(const std::vector<int64_t>& boundaries) {
  std::string out;
  for (int64_t b : boundaries)
    out += (out.empty() ? "" : ", ") + std::to_string(b);
  return out;
}

}  // namespace

int data_batches(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t steps = 0;
  int world_size = 1;
  bool json = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "set", po::value<std::vector<std::string>>(&overrides)->composing(),
      "override a config key: --set section.key=value (repeatable)")(
      "steps", po::value<int64_t>(&steps),
      "steps to show, 1..100000 (default: run.steps, at most 20)")(
      "world-size", po::value<int>(&world_size)->default_value(1),
      "data-parallel ranks, 1..1024: each step's micro-batches are dealt to this many ranks")(
      "json", po::bool_switch(&json), "print the same as one JSON object");
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&config_path));
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map vm;
  if (!parse_data_options("batches",
                          "usage: headroom data batches [EXP.toml] [options]\n\n"
                          "Prints the micro-batches of the experiment's first steps for every\n"
                          "rank, as train would build them from data.path (which must exist),\n"
                          "without reading a token. With no file, the embedded quickstart.\n",
                          args, visible, hidden, positional, vm))
    return 0;

  const ExperimentConfig config =
      config_path.empty() ? load_config_string(kQuickstartToml, kQuickstartName, overrides)
                          : load_config_file(config_path, overrides);
  if (vm.count("steps") && (steps < 1 || steps > kMaxSteps))
    throw UsageError("--steps " + std::to_string(steps) + ": expected 1.." +
                     std::to_string(kMaxSteps));
  if (world_size < 1 || world_size > kMaxWorldSize)
    throw UsageError("--world-size " + std::to_string(world_size) + ": expected 1.." +
                     std::to_string(kMaxWorldSize));
  if (!vm.count("steps")) steps = std::min(config.run.steps, kDefaultMaxSteps);
  const ModelConfig model_config = config.model.hf_config.empty()
                                       ? model_preset(config.model.preset)
                                       : load_hf_config(config.model.hf_config);
  if (config.data.path.empty())
    throw UsageError("data.path: required: a tokenized HDF5 file (docs/data-format.md)");
  std::error_code ec;
  const fs::file_status data_status = fs::status(config.data.path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError("data.path = " + config.data.path.substr(0, 200) + ": " + ec.message());
  if (!fs::exists(data_status))
    throw UsageError(config.data.path +
                     ": no such file (data.path; `headroom data synth` or `headroom train` "
                     "with data.synthesize_if_missing makes one)");
  const TokenDataset dataset = TokenDataset::open(config.data.path, model_config.vocab_size);

  BatchOptions options = batch_options_of(config, dataset, world_size, 0);
  Batcher batcher(dataset, options);
  const bool packed = options.mode == BatchOptions::Mode::kPacked;
  const int64_t budget = options.max_tokens_per_micro_batch;
  // The Batcher's options, not the config's: "auto" is resolved there.
  const std::vector<int64_t>& buckets = batcher.options().buckets;
  const bool bucketed = !packed && !buckets.empty();
  const bool grouped = !packed && options.group_pool > 0;

  nlohmann::ordered_json j;
  if (json) {
    j["data"] = config.data.path;
    j["documents"] = dataset.num_documents();
    j["tokens"] = dataset.num_tokens();
    j["mode"] = name_of(config.batch.mode);
    if (packed) {
      j["packing"] = name_of(config.batch.packing);
      j["packing_window"] = options.packing_window;
      j["max_tokens_per_micro_batch"] = budget;
    } else {
      j["micro_batch_size"] = options.micro_batch_size;
      j["seq_len"] = options.seq_len;
      if (bucketed) {
        j["buckets"] = buckets;
        j["pad_to"] = name_of(config.batch.pad_to);
        j["max_tokens_per_micro_batch"] = budget;
      }
      if (grouped) {
        j["group_pool"] = options.group_pool;
        j["max_tokens_per_micro_batch"] = budget;
      }
    }
    j["pad_to_multiple_of"] = options.pad_to_multiple_of;
    j["world_size"] = world_size;
    j["grad_accum"] = options.grad_accum;
    j["max_sample_tokens"] = options.max_sample_tokens;
    j["shuffle"] = options.shuffle;
    j["seed"] = options.seed;
    j["steps"] = nlohmann::ordered_json::array();
  } else {
    const std::string multiple =
        options.pad_to_multiple_of
            ? ", padded to a multiple of " + std::to_string(options.pad_to_multiple_of) + " tokens"
            : std::string();
    std::string how =
        packed
            ? std::string(name_of(config.batch.packing)) + " bins of " + std::to_string(budget) +
                  " tokens (window " +
                  (options.packing_window ? std::to_string(options.packing_window) + " documents)"
                                          : std::string("the epoch)")) +
                  multiple
        : bucketed ? std::to_string(buckets.size()) + " length buckets (" +
                         join_boundaries(buckets) + " tokens) under " + std::to_string(budget) +
                         " tokens per micro-batch, padded to " +
                         std::string(name_of(config.batch.pad_to)) + multiple
        : grouped ? "rows grouped by length in pools of " + std::to_string(options.group_pool) +
                        " micro-batches under " + std::to_string(budget) +
                        " tokens per micro-batch, padded to the longest" + multiple
                  : std::to_string(options.micro_batch_size) + " padded rows per micro-batch" +
                        (options.seq_len ? " of " + std::to_string(options.seq_len) + " tokens"
                                         : std::string(", as long as the longest")) +
                        multiple;
    std::printf(
        "%s: %lld documents, %lld tokens; %s %s, grad_accum %d, world_size %d, "
        "max_sample_tokens %lld, shuffle %s (seed %llu)\n",
        config.data.path.c_str(), static_cast<long long>(dataset.num_documents()),
        static_cast<long long>(dataset.num_tokens()),
        std::string(name_of(config.batch.mode)).c_str(), how.c_str(), options.grad_accum,
        world_size, static_cast<long long>(options.max_sample_tokens),
        options.shuffle ? "on" : "off", static_cast<unsigned long long>(options.seed));
  }
  const auto print_step = [&](const StepBatches& step) {
    const std::vector<std::vector<MicroBatchPlan>>& plan = step.ranks;
    nlohmann::ordered_json s;
    if (json) {
      s["step"] = step.step;
      s["epoch"] = step.epoch;
      s["ranks"] = nlohmann::ordered_json::array();
    } else {
      std::printf("step %lld (epoch %lld)\n", static_cast<long long>(step.step),
                  static_cast<long long>(step.epoch));
    }
    for (size_t r = 0; r < plan.size(); ++r) {
      nlohmann::ordered_json rank_json = {{"rank", r}, {"micro_batches", nlohmann::json::array()}};
      for (size_t m = 0; m < plan[r].size(); ++m) {
        const MicroBatchPlan& b = plan[r][m];
        const int64_t documents = static_cast<int64_t>(b.documents.size());
        if (json) {
          nlohmann::ordered_json mb = {{"documents", documents}, {"tokens", b.tokens},
                                       {"longest", b.longest},   {"truncated", b.truncated},
                                       {"padding", b.padding},   {"document_indices", b.documents}};
          if (bucketed) {
            mb["bucket"] = b.bucket;
            mb["width"] = b.width;
          }
          if (grouped) {
            mb["pool"] = b.pool;
            mb["width"] = b.width;
          }
          rank_json["micro_batches"].push_back(mb);
          continue;
        }
        std::printf("  %smicro-batch %zu: %3lld documents, %6lld tokens",
                    world_size > 1 ? ("rank " + std::to_string(r) + " ").c_str() : "", m,
                    static_cast<long long>(documents), static_cast<long long>(b.tokens));
        if (packed)
          std::printf(" (%5.1f%% of budget)",
                      100.0 * static_cast<double>(b.tokens) / static_cast<double>(budget));
        if (bucketed)
          std::printf(" (bucket %lld: <= %lld tokens, rows of %lld)",
                      static_cast<long long>(b.bucket),
                      static_cast<long long>(buckets[static_cast<size_t>(b.bucket)]),
                      static_cast<long long>(b.width));
        if (grouped)
          std::printf(" (pool %lld, rows of %lld)", static_cast<long long>(b.pool),
                      static_cast<long long>(b.width));
        std::printf(", longest %lld, truncated %lld, padding %lld",
                    static_cast<long long>(b.longest), static_cast<long long>(b.truncated),
                    static_cast<long long>(b.padding));
        if (!packed && b.tokens > 0)
          std::printf(" (%.1f%%)",
                      100.0 * static_cast<double>(b.padding) / static_cast<double>(b.tokens));
        std::printf("%s\n", (packed || bucketed || grouped) && b.tokens > budget
                                ? "  (one document over the budget)"
                                : "");
      }
      rank_json["tokens"] = step.rank_tokens[r];
      if (json) s["ranks"].push_back(rank_json);
    }
    if (json) {
      s["max_rank_tokens"] = step.max_rank_tokens;
      j["steps"].push_back(s);
    } else if (world_size > 1) {
      const int64_t step_max = step.max_rank_tokens, step_total = step.tokens;
      std::printf("  ranks: most %lld tokens, mean %.0f (%.1f%% of the busiest rank's)\n",
                  static_cast<long long>(step_max), static_cast<double>(step_total) / world_size,
                  100.0 * static_cast<double>(step_total) / world_size /
                      static_cast<double>(std::max<int64_t>(step_max, 1)));
    }
  };
  const BatchListingTotals totals = list_batches(batcher, steps, print_step);
  const int64_t total_tokens = totals.tokens, total_padding = totals.padding,
                total_batches = totals.micro_batches;
  const double balance = totals.rank_balance;
  if (json) {
    j["total"] = {{"micro_batches", total_batches},
                  {"tokens", total_tokens},
                  {"padding", total_padding},
                  {"padding_share", totals.padding_share()},
                  {"rank_balance", balance}};
    if (bucketed || grouped) {
      nlohmann::ordered_json groups = nlohmann::ordered_json::array();
      for (const GroupPadding& g : totals.groups) {
        nlohmann::ordered_json e;
        if (bucketed) {
          e["bucket"] = g.bucket;
        } else {
          e["epoch"] = g.epoch;
          e["pool"] = g.pool;
        }
        e["micro_batches"] = g.micro_batches;
        e["tokens"] = g.tokens;
        e["padding"] = g.padding;
        e["padding_share"] = g.padding_share();
        groups.push_back(e);
      }
      j[bucketed ? "padding_by_bucket" : "padding_by_pool"] = groups;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%lld steps, %lld micro-batches, %lld tokens (%lld padding, %.1f%%)",
              static_cast<long long>(steps), static_cast<long long>(total_batches),
              static_cast<long long>(total_tokens), static_cast<long long>(total_padding),
              total_tokens
                  ? 100.0 * static_cast<double>(total_padding) / static_cast<double>(total_tokens)
                  : 0.0);
  if (packed)
    std::printf(", mean fill %.1f%% of the budget",
                total_batches ? 100.0 * static_cast<double>(total_tokens) /
                                    static_cast<double>(total_batches * budget)
                              : 0.0);
  if (world_size > 1) std::printf(", rank balance %.1f%%", 100.0 * balance);
  std::printf("\n");
  for (const GroupPadding& g : totals.groups) {
    if (bucketed)
      std::printf("  bucket %lld (<= %lld tokens):", static_cast<long long>(g.bucket),
                  static_cast<long long>(buckets[static_cast<size_t>(g.bucket)]));
    else
      std::printf("  epoch %lld pool %lld:", static_cast<long long>(g.epoch),
                  static_cast<long long>(g.pool));
    std::printf(" %lld micro-batches, %lld tokens (%lld padding, %.1f%%)\n",
                static_cast<long long>(g.micro_batches), static_cast<long long>(g.tokens),
                static_cast<long long>(g.padding), 100.0 * g.padding_share());
  }
  return 0;
}

}  // namespace headroom
