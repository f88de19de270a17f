// The checks a resumed run makes of its checkpoint before anything is
// written: the folder is a complete checkpoint of the model this config
// trains, in its dtype, with steps left to train.
#pragma once

#include <string>

#include "config/config.h"
#include "model/model_config.h"
#include "train/train_state.h"

namespace headroom {

// Reads `resume_dir`/trainer_state.json and checks the weights (or, with
// [lora] enabled, the adapters: the frozen base comes from model.weights or
// model.seed as in the first run) against `model` and model.dtype, and that
// the checkpoint's step is before run.steps. Returns the state; throws
// UsageError "checkpoint.resume_from = "<dir>": <what is wrong>".
TrainState check_resume(const ExperimentConfig& config, const ModelConfig& model,
                        const std::string& resume_dir);

}  // namespace headroom
