// What would have fitted: an out-of-memory plan or run re-planned on the
// meta backend for the same target device with one change at a time from a
// catalogue of knobs (config/knobs.h), and the changes that fit ranked by
// what they cost.
//
// PyTorch's OOM message names the failing allocation and memory_viz shows
// what filled the card; neither says which change makes the run fit. Each
// counterfactual here is an ordinary `headroom plan` (train/run.h, promise
// 1: the same code path), of the same schedule (run.steps) on the same
// data, with the knob's --set overrides applied after the user's; its peak
// is the planner's, so applying the printed --set really gives it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "advice/step_cost.h"
#include "config/config.h"
#include "config/knobs.h"
#include "train/run.h"

namespace headroom {

// One plan's outcome, the highest over its ranks.
struct PlanFigures {
  bool ran = false;         // false: the config was refused (usage_error says why)
  std::string usage_error;  // the knob does not apply to this config
  bool out_of_memory = false;
  std::string oom_tag;  // the failing request's tag and phase
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  uint64_t capacity = 0;  // the allocator's (0: unlimited)
  StepShape shape;        // the first rank's mean step
  double seconds = 0;     // wall time of the plan(s)
  bool fits() const {
    return ran && !out_of_memory && (capacity == 0 || peak_reserved <= capacity);
  }
};

// The figures of a plan's or a run's ranks `ranks`, which are ranks
// first_rank, first_rank + 1, ... of `world_size` running `config`: the
// highest peaks up to and including the first rank that ran out of memory,
// the step shape of the first of them.
PlanFigures figures_of(const ExperimentConfig& config, int world_size,
                       const std::vector<RunResult>& ranks, int first_rank = 0);

// Plans `config` with `overrides` applied (train/plan_ranks.h: the ranks
// of `world_size`, simulated, one after another, up to the first that runs
// out of memory) into throwaway folders under `scratch`, which is removed
// afterwards; nothing else is written.
PlanFigures plan_with(const ExperimentConfig& config, int world_size,
                      const std::vector<std::string>& overrides,
                      const std::filesystem::path& scratch);

struct Counterfactual {
  Knob knob;
  PlanFigures plan;
  StepCost cost;
  StepCost base_cost;         // the config's own step over the same tokens
  double step_seconds = 0;    // seconds_of(cost) at the advice's rates
  double extra_fraction = 0;  // step_seconds over the baseline's, minus 1
};

struct Advice {
  PlanFigures baseline;  // the plan or run that ran out of memory
  DeviceRates rates;
  std::vector<Counterfactual> fits;         // ranked: tier, then extra step time
  std::vector<Counterfactual> not_fitting;  // planned, still out of memory (lowest peak first)
  std::vector<Counterfactual> refused;      // the config refused the change
  // When no single change fits: the two fitting-closest changes of the same
  // training combined, if that fits.
  std::optional<Counterfactual> combined;
  double seconds = 0;  // wall time of all the plans
};

// Re-plans `config`, which ran out of memory at `world_size` ranks with the
// figures `failed` (figures_of the failed plan's or run's ranks: it is not
// planned again), with every knob of the catalogue. `scratch` is a folder
// it may create and removes.
Advice advise(const ExperimentConfig& config, int world_size, const PlanFigures& failed,
              const std::filesystem::path& scratch);

// The text `plan` and `train` print after a postmortem: the first line is the
// cheapest change that fits as the --set to use.
std::string format_advice(const Advice& advice);

// The advice as JSON text, as the trace stores it (/oom/advice) and
// `report` reads it.
std::string advice_json(const Advice& advice);

}  // namespace headroom
