#include "train/plan_ranks.h"

#include <memory>

#include "comm/communicator.h"

namespace headroom {

std::vector<RunResult> plan_ranks(const ExperimentConfig& config, int world_size,
                                  const PlanRanksControl& control) {
  std::vector<RunResult> results;
  for (int rank = 0; rank < world_size; ++rank) {
    std::unique_ptr<Communicator> comm =
        world_size == 1 ? make_single_rank_comm() : make_simulated_comm(rank, world_size);
    // A plan writes no checkpoint: nothing to stop resumably for.
    Run run(config, RunMode::kPlan, *comm, RunControl{control.overwrite, nullptr});
    RunObserver quiet;
    results.push_back(run.execute(control.observer ? control.observer(rank) : quiet));
    if (control.stop_at_first_oom && results.back().oom) break;
  }
  return results;
}

}  // namespace headroom
