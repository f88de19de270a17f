// `headroom export [exp.toml] --adapter DIR --merge --out DIR`: a LoRA run's
// adapters folded into its base, as a Hugging Face model folder.
// `headroom export --checkpoint DIR --out DIR`: a checkpoint.format =
// "sharded" checkpoint assembled into one (train/sharded_checkpoint.h).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "parse_options.h"
#include "run_experiment.h"
#include "train/sharded_checkpoint.h"
#include "util/bytes.h"
#include "util/error.h"

namespace po = boost::program_options;

namespace headroom {

int export_command(const std::vector<std::string>& args) {
  RunOptions options;
  std::string adapter, out, checkpoint;
  bool merge = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "adapter", po::value<std::string>(&adapter),
      "LoRA adapters: a checkpoint folder of a lora.enabled run (checkpoints/step-N) or a PEFT "
      "folder (adapter_model.safetensors + adapter_config.json)")(
      "checkpoint", po::value<std::string>(&checkpoint),
      "a sharded checkpoint folder (checkpoint.format = \"sharded\", checkpoints/step-N): "
      "assemble its rank files into model.safetensors + config.json")(
      "merge", po::bool_switch(&merge),
      "fold the adapters into the base weights (W += alpha/r * B A); required: headroom writes "
      "adapters in PEFT's layout already")("out", po::value<std::string>(&out),
                                           "folder for model.safetensors and config.json")(
      "set", po::value<std::vector<std::string>>(&options.overrides)->composing(),
      "override a config key: --set section.key=value (repeatable)")(
      "overwrite", po::bool_switch(&options.overwrite), "replace an existing model.safetensors");
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&options.config_path));
  po::positional_options_description positional;
  positional.add("config", 1);
  const po::variables_map vm = parse_command_line(args, visible, hidden, positional, "export");
  if (vm.count("help")) {
    std::cout << "usage: headroom export [exp.toml] --adapter DIR --merge --out DIR [options]\n"
                 "       headroom export --checkpoint DIR --out DIR [--overwrite]\n\n"
                 "Folds a LoRA run's adapters into its base model (model.weights, or the\n"
                 "model.seed initialization) and writes a Hugging Face folder that loads\n"
                 "with transformers' from_pretrained. The experiment's [model] and [lora]\n"
                 "describe the base and the adapters.\n\n"
                 "With --checkpoint, assembles a sharded checkpoint (every rank's\n"
                 "shard.rank<R>.safetensors) into the Hugging Face model.safetensors that a\n"
                 "consolidated checkpoint of the same run holds, byte for byte, streaming\n"
                 "one piece of a tensor at a time.\n\n"
              << visible << "\n";
    return 0;
  }
  if (!checkpoint.empty()) {
    if (!adapter.empty() || merge)
      throw UsageError(
          "--checkpoint: exports a sharded checkpoint; --adapter and --merge belong to "
          "the other form (see headroom export --help)");
    if (out.empty()) throw UsageError("--out: required (see headroom export --help)");
    const uint64_t bytes = export_sharded(checkpoint, out, options.overwrite);
    std::printf("headroom export: assembled %s into %s/model.safetensors (%s) and config.json\n",
                checkpoint.c_str(), out.c_str(), format_bytes(bytes).c_str());
    return 0;
  }
  if (adapter.empty()) throw UsageError("--adapter: required (see headroom export --help)");
  if (out.empty()) throw UsageError("--out: required (see headroom export --help)");
  if (!merge)
    throw UsageError(
        "--merge: required: export writes a merged model (the adapters themselves are already "
        "PEFT's adapter_model.safetensors + adapter_config.json)");
  return export_merged(options, adapter, out);
}

}  // namespace headroom
