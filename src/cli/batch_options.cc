#include "batch_options.h"

#include <algorithm>

namespace headroom {

BatchOptions batch_options_of(const ExperimentConfig& config, const TokenDataset& dataset,
                              int world_size, int rank) {
  BatchOptions o;
  o.mode = config.batch.mode == BatchSection::Mode::kPadded ? BatchOptions::Mode::kPadded
                                                            : BatchOptions::Mode::kPacked;
  switch (config.batch.packing) {
    case BatchSection::Packing::kFirstFit:
      o.packing = BatchOptions::Packing::kFirstFit;
      break;
    case BatchSection::Packing::kFirstFitDecreasing:
      o.packing = BatchOptions::Packing::kFirstFitDecreasing;
      break;
    case BatchSection::Packing::kNextFit:
      o.packing = BatchOptions::Packing::kNextFit;
      break;
  }
  o.packing_window = config.batch.packing_window;
  o.max_tokens_per_micro_batch = config.batch.max_tokens_per_micro_batch;
  o.micro_batch_size = config.batch.micro_batch_size;
  o.seq_len = config.batch.seq_len;
  o.pad_id = static_cast<int32_t>(std::max<int64_t>(dataset.attributes().eos_id, 0));
  o.grad_accum = config.batch.grad_accum;
  o.max_sample_tokens = config.data.max_sample_tokens;
  o.shuffle = config.data.shuffle;
  o.seed = static_cast<uint64_t>(config.data.seed);
  o.world_size = world_size;
  o.rank = rank;
  return o;
}

}  // namespace headroom
