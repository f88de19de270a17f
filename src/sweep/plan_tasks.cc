#include "sweep/plan_tasks.h"

#include <algorithm>

#include "train/plan_ranks.h"
#include "util/bytes.h"

namespace headroom {

uint64_t TaskPlan::max_peak_reserved() const {
  uint64_t peak = 0;
  for (const RankPlan& r : ranks)
    peak = std::max(peak, r.peak_reserved);
  return peak;
}

uint64_t TaskPlan::max_peak_allocated() const {
  uint64_t peak = 0;
  for (const RankPlan& r : ranks)
    peak = std::max(peak, r.peak_allocated);
  return peak;
}

TaskPlan plan_task(const ExperimentConfig& config, int world_size, bool overwrite) {
  TaskPlan plan;
  const RankPlan* first_oom = nullptr;
  // Quiet: the sweep prints one table row per task instead.
  const std::vector<RunResult> results = plan_ranks(
      config, world_size,
      PlanRanksControl{.overwrite = overwrite, .stop_at_first_oom = false, .observer = {}});
  for (size_t rank = 0; rank < results.size(); ++rank) {
    const RunResult& result = results[rank];
    RankPlan r;
    r.rank = static_cast<int>(rank);
    r.peak_allocated = result.memory.peak_allocated;
    r.peak_reserved = result.memory.peak_reserved;
    if (result.oom) {
      r.out_of_memory = true;
      r.oom_tag = result.oom->tag;
      r.oom_phase = std::string(name_of(result.oom->phase));
      r.oom_step = result.oom->step;
      r.oom_requested = result.oom->requested_bytes;
    }
    plan.capacity = result.capacity;
    plan.ranks.push_back(std::move(r));
  }
  for (const RankPlan& r : plan.ranks)
    if (r.out_of_memory && !first_oom) first_oom = &r;
  if (first_oom) {
    plan.fits = false;
    plan.verdict = "OUT OF MEMORY" +
                   (world_size > 1 ? " on rank " + std::to_string(first_oom->rank) : "") +
                   (first_oom->oom_step < 0 ? std::string(" in initialization")
                                            : " at step " + std::to_string(first_oom->oom_step)) +
                   " (" + first_oom->oom_phase + ", " + format_bytes(first_oom->oom_requested) +
                   " for " + first_oom->oom_tag + ")";
  } else if (plan.capacity == 0) {
    plan.verdict = "no memory.device or memory.device_capacity to check against";
  } else {
    plan.verdict = "fits, " +
                   format_bytes(plan.capacity - std::min(plan.capacity, plan.max_peak_reserved())) +
                   " to spare";
  }
  return plan;
}

}  // namespace headroom
