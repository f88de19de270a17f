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
    if (state.sharded_format) {
      // Every rank file the index names, and the index against this model.
      // Its parts' layouts (whatever this run's parallel.tensor: a resume
      // under another cuts its parts from them).
      const ShardIndex index = read_shard_index(resume_dir);
      if (const std::string problem = tensor_parallel_problem(model, index.tensor_parallel);
          !problem.empty())
        throw UsageError(shard_index_path(resume_dir) + ": \"tensor_parallel\": " + problem);
      check_sharded_checkpoint(index, transformer_layouts(model, {}, false, index.tensor_parallel),
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
