#include "train/resume_check.h"

#include <string_view>

#include "model/safetensors.h"
#include "model/weights.h"
#include "train/config_options.h"
#include "train/run_folder.h"
#include "train/sharded_checkpoint.h"
#include "util/error.h"

namespace headroom {

TrainState check_resume(const ExperimentConfig& config, const ModelConfig& model,
                        const std::string& resume_dir) {
  const std::string key = "checkpoint.resume_from = " + quote_path(resume_dir) + ": ";
  try {
    if (!path_exists("checkpoint.resume_from", resume_dir)) throw UsageError("no such folder");
    TrainState state = read_train_state(resume_dir);
    // The optimizer files are per tensor-parallel part: resharding them
    // onto another parallel.tensor is not built.
    if (state.tensor_parallel != config.parallel.tensor)
      throw UsageError("the checkpoint was written with parallel.tensor = " +
                       std::to_string(state.tensor_parallel) + " and this run has " +
                       std::to_string(config.parallel.tensor) +
                       ": resume with the tensor-parallel size that wrote it (the data-parallel "
                       "size may differ)");
    if (state.sharded_format) {
      // Every rank file the index names, and the index against this model.
      check_sharded_checkpoint(read_shard_index(resume_dir), transformer_layouts(model),
                               dtype_of(config.model.dtype));
    } else if (config.lora.enabled) {
      check_adapter(model, lora_options_of(config), resume_dir);
    } else {
      const std::string weights = resume_dir + "/model.safetensors";
      check_weights(model, weights);
      // The optimizer's states follow the weights' dtype (bf16 weights have
      // fp32 masters), so a dtype change would fail later with a missing
      // tensor; say what really differs.
      const SafetensorsIndex index = SafetensorsIndex::open(weights);
      const DType want = dtype_of(config.model.dtype);
      for (const SafetensorsEntry& entry : index.entries())
        if (to_dtype(entry.dtype) != want)
          throw UsageError("the checkpoint's weights are " +
                           std::string(safetensors_name(entry.dtype)) + " (" + entry.name + " in " +
                           weights + ") but model.dtype = \"" +
                           std::string(name_of(config.model.dtype)) +
                           "\": resume with the model.dtype the checkpoint was trained with");
    }
    if (state.step >= config.run.steps)
      throw UsageError("the checkpoint is at step " + std::to_string(state.step) +
                       ", run.steps = " + std::to_string(config.run.steps) +
                       ": nothing left to train");
    return state;
  } catch (const UsageError& e) {
    if (std::string_view(e.what()).starts_with("checkpoint.resume_from")) throw;
    throw UsageError(key + e.what());
  }
}

}  // namespace headroom
