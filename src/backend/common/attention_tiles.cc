#include "backend/common/attention_tiles.h"

#include <algorithm>

namespace headroom {

TileKind AttentionTilePlan::kind(int64_t i, int64_t j) const {
  if (j < first_key_tile[i] || j > last_key_tile[i]) return TileKind::kSkipped;
  const int64_t k0 = j * block_size, k1 = std::min(tokens, k0 + block_size);
  // Every row's interval covers [k0, k1) iff the last row's starts by k0
  // (lo never decreases) and the first row's reaches k1 (hi never decreases).
  const bool every_pair_visible = last_row_lo[i] <= k0 && first_row_hi[i] >= k1;
  return every_pair_visible ? TileKind::kFull : TileKind::kPartial;
}

AttentionTilePlan attention_tile_plan(const std::vector<int32_t>& cu, int64_t tokens,
                                      int64_t block_size, const AttentionMask& mask) {
  AttentionTilePlan plan;
  plan.tokens = tokens;
  plan.block_size = block_size;
  plan.mask = mask;
  plan.tiles = (tokens + block_size - 1) / block_size;
  const auto n = static_cast<size_t>(plan.tiles);
  plan.first_key_tile.resize(n);
  plan.last_key_tile.resize(n);
  plan.first_query_tile.resize(n);
  plan.last_query_tile.resize(n);
  plan.last_row_lo.resize(n);
  plan.first_row_hi.resize(n);
  for (int64_t i = 0; i < plan.tiles; ++i) {
    const int64_t q0 = i * block_size, q1 = std::min(tokens, q0 + block_size);
    const KeyInterval first = visible_keys(mask, cu, q0), last = visible_keys(mask, cu, q1 - 1);
    // The rows see [first.lo, last.hi): one interval, every key tile of
    // which holds a visible pair (the header's argument).
    plan.first_key_tile[i] = first.lo / block_size;
    plan.last_key_tile[i] = (last.hi - 1) / block_size;
    plan.last_row_lo[i] = last.lo;
    plan.first_row_hi[i] = first.hi;
  }
  // Both row ranges' ends never decrease: key tile j is computed from the
  // first query tile whose range reaches j to the last one starting by j.
  for (int64_t j = 0, a = 0, b = 0; j < plan.tiles; ++j) {
    while (plan.last_key_tile[a] < j)
      ++a;
    while (b + 1 < plan.tiles && plan.first_key_tile[b + 1] <= j)
      ++b;
    plan.first_query_tile[j] = a;
    plan.last_query_tile[j] = b;
  }
  for (int64_t i = 0; i < plan.tiles; ++i)
    for (int64_t j = plan.first_key_tile[i]; j <= plan.last_key_tile[i]; ++j)
      ++(plan.kind(i, j) == TileKind::kFull ? plan.full : plan.partial);
  plan.skipped = plan.tiles * plan.tiles - plan.full - plan.partial;
  return plan;
}

}  // namespace headroom
