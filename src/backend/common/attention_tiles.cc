#include "backend/common/attention_tiles.h"

#include <algorithm>

namespace headroom {

namespace {

// The start of the document holding token i: the last offset <= i. With
// empty documents (repeated offsets) that is the start of the non-empty one.
int64_t document_start(const std::vector<int32_t>& cu, int64_t i) {
  auto it = std::upper_bound(cu.begin(), cu.end(), i);
  return *(it - 1);
}

}  // namespace

int64_t first_visible_key(const std::vector<int32_t>& cu, int64_t i, int64_t window) {
  int64_t start = document_start(cu, i);
  return window > 0 ? std::max(start, i - window + 1) : start;
}

TileKind AttentionTilePlan::kind(int64_t i, int64_t j) const {
  if (j > i || j < first_key_tile[i]) return TileKind::kSkipped;
  const int64_t q0 = i * block_size, q1 = std::min(tokens, q0 + block_size);
  const int64_t k0 = j * block_size, k1 = std::min(tokens, k0 + block_size);
  // Every pair is visible iff the earliest query sees the tile's last key
  // (causal), the latest query its first (window), and one document spans
  // them all (k0 <= q0 here, so that is [k0, q1)).
  const bool every_pair_visible =
      k1 - 1 <= q0 && (window == 0 || (q1 - 1) - k0 < window) && last_row_document_start[i] <= k0;
  return every_pair_visible ? TileKind::kFull : TileKind::kPartial;
}

AttentionTilePlan attention_tile_plan(const std::vector<int32_t>& cu, int64_t tokens,
                                      int64_t block_size, int64_t window) {
  AttentionTilePlan plan;
  plan.tokens = tokens;
  plan.block_size = block_size;
  plan.window = window;
  plan.tiles = (tokens + block_size - 1) / block_size;
  const auto n = static_cast<size_t>(plan.tiles);
  plan.first_key_tile.resize(n);
  plan.last_query_tile.resize(n);
  plan.last_row_document_start.resize(n);
  for (int64_t i = 0; i < plan.tiles; ++i) {
    const int64_t q0 = i * block_size, q1 = std::min(tokens, q0 + block_size);
    // The tile's rows see [first_visible_key(q0), q1 - 1]: one interval,
    // every key tile of which holds a visible pair.
    plan.first_key_tile[i] = first_visible_key(cu, q0, window) / block_size;
    plan.last_row_document_start[i] = document_start(cu, q1 - 1);
  }
  // first_key_tile never decreases, so the query tiles computing key tile j
  // end at the last i with first_key_tile[i] <= j.
  for (int64_t j = 0, i = 0; j < plan.tiles; ++j) {
    while (i + 1 < plan.tiles && plan.first_key_tile[i + 1] <= j)
      ++i;
    plan.last_query_tile[j] = i;
  }
  for (int64_t i = 0; i < plan.tiles; ++i)
    for (int64_t j = plan.first_key_tile[i]; j <= i; ++j)
      ++(plan.kind(i, j) == TileKind::kFull ? plan.full : plan.partial);
  plan.skipped = plan.tiles * plan.tiles - plan.full - plan.partial;
  return plan;
}

}  // namespace headroom
