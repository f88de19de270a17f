// The embedded quickstart made small enough for a cli test to train in a
// second or two: what the tests of tests/cli share, each appending what it
// varies (steps, checkpoints, LoRA, world size).
#pragma once

#include <string>

namespace headroom::testing {

// The --set overrides (with a leading space, to append to a command): a
// dataset of `documents` synthetic documents, micro-batches of 256 tokens,
// loss chunks of 128 and `warmup_steps` warmup steps (the quickstart's 5
// would exceed the few steps a test runs).
inline std::string small_run_overrides(int documents, int warmup_steps = 1) {
  return " --set data.synthetic_documents=" + std::to_string(documents) +
         " --set batch.max_tokens_per_micro_batch=256 --set loss.chunk_size=128"
         " --set schedule.warmup_steps=" +
         std::to_string(warmup_steps);
}

}  // namespace headroom::testing
