// Planning every rank of a data-parallel job in this one process: the plan
// Run (RunMode::kPlan, train/run.h: the code path `headroom plan` takes) of
// rank after rank, each on its own simulated communicator
// (make_simulated_comm) with its own batches; one rank on
// make_single_rank_comm. `plan --world-size`, a sweep's task plans and the
// advice's counterfactual plans all go through here, so the ranks of a
// plan are simulated one way.
#pragma once

#include <functional>
#include <vector>

#include "config/config.h"
#include "train/run.h"
#include "train/run_observer.h"

namespace headroom {

// Where the plans' traces go and who hears of them.
struct PlanRanksControl {
  // The traces go to the config's run folder (run.out_dir / run.name,
  // plan.rank<R>.h5); true replaces an earlier plan's files there.
  bool overwrite = false;
  // Stop after the first rank that runs out of memory: for a caller that
  // only asks whether the config fits (the advice), the later ranks would
  // not change the answer.
  bool stop_at_first_oom = false;
  // Rank r's observer (it must outlive the call); empty: every rank runs
  // quietly.
  std::function<RunObserver&(int rank)> observer;
};

// Plans `config` as ranks 0 .. world_size - 1 of a job, one after another,
// and returns each rank's result in rank order (fewer when
// stop_at_first_oom stopped early). Throws as Run does (UsageError: data,
// weights, a locked folder) before the rank that failed wrote anything.
std::vector<RunResult> plan_ranks(const ExperimentConfig& config, int world_size,
                                  const PlanRanksControl& control = {});

}  // namespace headroom
