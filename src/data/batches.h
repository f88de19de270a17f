// `headroom data batches` as library code: the micro-batches the first steps
// of a run would train on, per rank, from the same Batcher training builds,
// without reading a token — to see bin fill, padding, oversize documents,
// truncation and the balance across ranks before spending a run. The CLI
// (src/cli/data_batches.cc) turns an experiment into the BatchOptions and
// prints the listing.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data/batcher.h"

namespace headroom {

// One step of the listing.
struct StepBatches {
  int64_t step = 0;                                // 1-based
  int64_t epoch = 0;                               // the epoch the step starts in
  std::vector<std::vector<MicroBatchPlan>> ranks;  // [rank][micro-batch]
  std::vector<int64_t> rank_tokens;                // per rank, padding included
  int64_t max_rank_tokens = 0;                     // the busiest rank's
  int64_t tokens = 0;                              // all ranks together
};

// The padding of one bucket (over every epoch listed) or of one pool (of
// one epoch), over the micro-batches listed.
struct GroupPadding {
  int64_t bucket = -1;  // index into options().buckets; -1 for a pool
  int64_t epoch = -1;   // a pool's epoch; -1 for a bucket
  int64_t pool = -1;    // a pool's index within its epoch; -1 for a bucket
  int64_t micro_batches = 0;
  int64_t tokens = 0;  // padding included
  int64_t padding = 0;
  // padding / tokens, 0 without tokens
  double padding_share() const {
    return tokens > 0 ? static_cast<double>(padding) / static_cast<double>(tokens) : 0.0;
  }
};

// The whole listing.
struct BatchListingTotals {
  int64_t steps = 0;
  int64_t micro_batches = 0;
  int64_t tokens = 0;  // padding included
  int64_t padding = 0;
  // The mean rank's tokens over the busiest rank's, summed over the steps:
  // the fraction of time ranks are not waiting at the reduction.
  double rank_balance = 0.0;
  // With buckets: one entry per bucket that a listed micro-batch came from,
  // by bucket; with group_pool: one per pool, by (epoch, pool); else empty.
  std::vector<GroupPadding> groups;
  // padding / tokens, 0 without tokens
  double padding_share() const {
    return tokens > 0 ? static_cast<double>(padding) / static_cast<double>(tokens) : 0.0;
  }
};

// Plans the next `steps` steps of `batcher` for all its options().world_size
// ranks at once (Batcher::next_step_plan, which advances the cursor) and
// calls `on_step` after each, in order, so that a long listing is printed as
// it goes and never held. Step numbers count from 1 at the call. The caller
// builds the Batcher, whose constructor checks the options and the dataset
// (UsageError), before printing anything.
BatchListingTotals list_batches(Batcher& batcher, int64_t steps,
                                const std::function<void(const StepBatches&)>& on_step);

}  // namespace headroom
