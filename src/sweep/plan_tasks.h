// Planning a sweep's tasks before any is queued: each task's ranks planned
// on the meta backend (train/plan_ranks.h, the one code path `headroom plan`
// takes), once per rank of its job shape, against its target device
// (run.backend, memory.device / memory.device_capacity).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace headroom {

struct RankPlan {
  int rank = 0;
  uint64_t peak_allocated = 0;  // the allocator's peak over initialization and every step
  uint64_t peak_reserved = 0;
  bool out_of_memory = false;
  // The failing request when out_of_memory: its tag, phase, step and size.
  std::string oom_tag;
  std::string oom_phase;
  int64_t oom_step = -1;
  uint64_t oom_requested = 0;
};

struct TaskPlan {
  std::vector<RankPlan> ranks;
  uint64_t capacity = 0;  // the allocator's; 0 = nothing to check against
  bool fits = true;       // no rank ran out of memory
  // "fits, 1.2 GiB to spare", "OUT OF MEMORY at step 0 (loss.forward,
  // 970.0 MiB for loss.chunk.7.logits)", "no capacity set".
  std::string verdict;

  uint64_t max_peak_reserved() const;
  uint64_t max_peak_allocated() const;
};

// Plans `config` as rank after rank of `world_size` (simulated
// communicators, as `plan --world-size`), silently: the plan traces go to
// the task's run folder (plan.rank<R>.h5), nothing is printed. `overwrite`
// replaces earlier plan files there. Throws UsageError as `headroom plan`
// would (data, weights, a locked folder).
TaskPlan plan_task(const ExperimentConfig& config, int world_size, bool overwrite);

}  // namespace headroom
