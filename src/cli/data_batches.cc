// `headroom data batches [EXP.toml]`: the micro-batches an experiment's first
// steps would train on, from the same PackedBatcher run_experiment builds —
// to see bin fill, oversize documents and truncation before spending a run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/packer.h"
#include "data/token_dataset.h"
#include "data_tools.h"
#include "embedded_quickstart.h"
#include "model/model_config.h"
#include "util/error.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace headroom {

namespace {

constexpr int64_t kDefaultMaxSteps = 20;

}  // namespace

int data_batches(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t steps = 0;
  bool json = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "set", po::value<std::vector<std::string>>(&overrides)->composing(),
      "override a config key: --set section.key=value (repeatable)")(
      "steps", po::value<int64_t>(&steps), "steps to show (default: run.steps, at most 20)")(
      "json", po::bool_switch(&json), "print the same as one JSON object");
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&config_path));
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map vm;
  if (!parse_data_options("batches",
                          "usage: headroom data batches [EXP.toml] [options]\n\n"
                          "Prints the packed micro-batches of the experiment's first steps, as\n"
                          "train would build them from data.path (which must exist). With no\n"
                          "file, the embedded quickstart experiment.\n",
                          args, visible, hidden, positional, vm))
    return 0;

  const ExperimentConfig config =
      config_path.empty() ? load_config_string(kQuickstartToml, kQuickstartName, overrides)
                          : load_config_file(config_path, overrides);
  if (vm.count("steps") && steps < 1)
    throw UsageError("--steps " + std::to_string(steps) + ": must be at least 1");
  if (!vm.count("steps")) steps = std::min(config.run.steps, kDefaultMaxSteps);
  if (config.batch.mode != BatchSection::Mode::kPacked)
    throw UsageError("batch.mode = \"padded\": not supported yet (use \"packed\")");
  const ModelConfig model_config = config.model.hf_config.empty()
                                       ? model_preset(config.model.preset)
                                       : load_hf_config(config.model.hf_config);
  if (config.data.path.empty())
    throw UsageError("data.path: required: a tokenized HDF5 file (docs/data-format.md)");
  if (!fs::exists(config.data.path))
    throw UsageError(config.data.path +
                     ": no such file (data.path; `headroom data synth` or `headroom train` "
                     "with data.synthesize_if_missing makes one)");
  const TokenDataset dataset = TokenDataset::open(config.data.path, model_config.vocab_size);

  // As run_experiment builds it: the same options give the same plan.
  PackOptions pack;
  pack.max_tokens_per_micro_batch = config.batch.max_tokens_per_micro_batch;
  pack.grad_accum = config.batch.grad_accum;
  pack.max_sample_tokens = config.data.max_sample_tokens;
  pack.shuffle = config.data.shuffle;
  pack.seed = static_cast<uint64_t>(config.data.seed);
  PackedBatcher batcher(dataset, pack);
  const int64_t budget = pack.max_tokens_per_micro_batch;

  nlohmann::ordered_json j;
  if (json) {
    j["data"] = config.data.path;
    j["documents"] = dataset.num_documents();
    j["tokens"] = dataset.num_tokens();
    j["max_tokens_per_micro_batch"] = budget;
    j["grad_accum"] = pack.grad_accum;
    j["max_sample_tokens"] = pack.max_sample_tokens;
    j["shuffle"] = pack.shuffle;
    j["seed"] = pack.seed;
    j["steps"] = nlohmann::ordered_json::array();
  } else {
    std::printf(
        "%s: %lld documents, %lld tokens; budget %lld tokens per micro-batch, grad_accum %d, "
        "max_sample_tokens %lld, shuffle %s (seed %llu)\n",
        config.data.path.c_str(), static_cast<long long>(dataset.num_documents()),
        static_cast<long long>(dataset.num_tokens()), static_cast<long long>(budget),
        pack.grad_accum, static_cast<long long>(pack.max_sample_tokens),
        pack.shuffle ? "on" : "off", static_cast<unsigned long long>(pack.seed));
  }
  int64_t total_tokens = 0, total_batches = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const Cursor cursor = batcher.cursor();
    const std::vector<Batch> micro_batches = batcher.next_step();
    nlohmann::ordered_json s;
    if (json) {
      s["step"] = step + 1;
      s["epoch"] = cursor.epoch;
      s["micro_batches"] = nlohmann::ordered_json::array();
    } else {
      std::printf("step %lld (epoch %lld)\n", static_cast<long long>(step + 1),
                  static_cast<long long>(cursor.epoch));
    }
    for (size_t m = 0; m < micro_batches.size(); ++m) {
      const Batch& b = micro_batches[m];
      const int64_t documents = static_cast<int64_t>(b.cu_seqlens.size()) - 1;
      total_tokens += b.size();
      ++total_batches;
      if (json) {
        s["micro_batches"].push_back({{"documents", documents},
                                      {"tokens", b.size()},
                                      {"longest", b.longest},
                                      {"truncated", b.truncated},
                                      {"padding", b.padding},
                                      {"targets", b.counted}});
        continue;
      }
      std::printf(
          "  micro-batch %zu: %3lld documents, %6lld tokens (%5.1f%% of budget), longest %lld, "
          "truncated %lld, padding %lld%s\n",
          m, static_cast<long long>(documents), static_cast<long long>(b.size()),
          100.0 * static_cast<double>(b.size()) / static_cast<double>(budget),
          static_cast<long long>(b.longest), static_cast<long long>(b.truncated),
          static_cast<long long>(b.padding),
          b.size() > budget ? "  (one document over the budget)" : "");
    }
    if (json) j["steps"].push_back(s);
  }
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%lld steps, %lld micro-batches, %lld tokens, mean fill %.1f%% of the budget\n",
              static_cast<long long>(steps), static_cast<long long>(total_batches),
              static_cast<long long>(total_tokens),
              total_batches ? 100.0 * static_cast<double>(total_tokens) /
                                  static_cast<double>(total_batches * budget)
                            : 0.0);
  return 0;
}

}  // namespace headroom
