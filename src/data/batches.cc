#include "data/batches.h"

#include <algorithm>
#include <map>
#include <utility>

namespace headroom {

BatchListingTotals list_batches(Batcher& batcher, int64_t steps,
                                const std::function<void(const StepBatches&)>& on_step) {
  BatchListingTotals totals;
  int64_t worst_rank_tokens = 0;  // the busiest rank's tokens, summed over the steps
  // Keyed (bucket, -1) or (epoch, pool), so the entries come out in order.
  std::map<std::pair<int64_t, int64_t>, GroupPadding> groups;
  StepBatches s;
  for (int64_t step = 0; step < steps; ++step) {
    s.step = step + 1;
    s.epoch = batcher.cursor().epoch;
    s.ranks = batcher.next_step_plan();
    s.rank_tokens.assign(s.ranks.size(), 0);
    s.max_rank_tokens = 0;
    s.tokens = 0;
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      for (const MicroBatchPlan& b : s.ranks[r]) {
        s.rank_tokens[r] += b.tokens;
        totals.padding += b.padding;
        ++totals.micro_batches;
        if (b.bucket >= 0 || b.pool >= 0) {
          GroupPadding& g = b.bucket >= 0 ? groups[{b.bucket, -1}] : groups[{b.epoch, b.pool}];
          if (b.bucket >= 0) {
            g.bucket = b.bucket;
          } else {
            g.epoch = b.epoch;
            g.pool = b.pool;
          }
          ++g.micro_batches;
          g.tokens += b.tokens;
          g.padding += b.padding;
        }
      }
      s.max_rank_tokens = std::max(s.max_rank_tokens, s.rank_tokens[r]);
      s.tokens += s.rank_tokens[r];
    }
    totals.tokens += s.tokens;
    worst_rank_tokens += s.max_rank_tokens;
    ++totals.steps;
    on_step(s);
  }
  for (const auto& [key, g] : groups)
    totals.groups.push_back(g);
  totals.rank_balance = static_cast<double>(totals.tokens) / batcher.options().world_size /
                        static_cast<double>(std::max<int64_t>(worst_rank_tokens, 1));
  return totals;
}

}  // namespace headroom
