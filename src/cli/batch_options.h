// The Batcher's options as an experiment configures them: one function, so
// `train`, `plan` and `headroom data batches` batch identically.
#pragma once

#include "config/config.h"
#include "data/batcher.h"
#include "data/token_dataset.h"

namespace headroom {

// [batch] and [data] of `config` for `rank` of `world_size`; padding uses
// the dataset's eos_id when it has one (padding is never a target, so its id
// only has to be a token of the vocabulary).
BatchOptions batch_options_of(const ExperimentConfig& config, const TokenDataset& dataset,
                              int world_size, int rank);

}  // namespace headroom
