// `headroom fit`: the largest value of one knob whose plan fits, found by
// planning (advice.h's plan_with), not by launching jobs: DeepSpeed's
// autotuner needs GPUs and minutes per trial, a plan needs neither.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "advice/advice.h"

namespace headroom {

// The keys `fit --vary` searches: integers whose memory grows with them.
const std::vector<std::string>& fit_keys();

struct FitProbe {
  int64_t value = 0;
  PlanFigures plan;
};

struct FitResult {
  std::string key;
  int64_t largest_fitting = 0;   // 0: not even the smallest value tried fits
  int64_t smallest_failing = 0;  // 0: no value up to the bound failed
  std::vector<FitProbe> probes;  // every plan, in the order made
  double seconds = 0;
};

// Searches `key` (one of fit_keys()) over [1, upper] for the largest value
// whose plan of `config` at `world_size` fits: doubling (or halving) from
// the config's own value until the answer changes, then bisecting, so
// about 2 log2(upper) plans. Assumes memory grows with the value. A value
// the config refuses (UsageError from the loader or the run) counts as not
// fitting and its reason is kept in the probe. Throws UsageError for a key
// that is not searchable.
FitResult fit_one(const ExperimentConfig& config, int world_size, const std::string& key,
                  int64_t upper, const std::filesystem::path& scratch);

// The table `fit` prints.
std::string format_fit(const FitResult& result);

// `fit --search`: every combination of a small space of same-training knobs
// (activation checkpointing none / every_2 / full; the loss whole, or
// chunked with recompute; ZeRO stages from the config's up, with ranks;
// optimizer offload off / on) planned, and those that fit on the Pareto front
// of peak reserved against estimated step time (step_cost.h).
struct SearchPoint {
  std::vector<std::string> overrides;
  PlanFigures plan;
  double step_seconds = 0;
  bool pareto = false;  // no other fitting point is both smaller and faster
};
struct SearchResult {
  std::vector<SearchPoint> points;  // every combination planned, in search order
  std::string rates;                // what the step times assume
  double seconds = 0;
};
SearchResult fit_search(const ExperimentConfig& config, int world_size,
                        const std::filesystem::path& scratch);
std::string format_search(const SearchResult& result);

}  // namespace headroom
