#include "backend/cpu/attention_tiles.h"

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

AttentionTilePlan attention_tile_plan(const std::vector<int32_t>& cu, int64_t tokens,
                                      int64_t block_size, int64_t window) {
  AttentionTilePlan plan;
  plan.tokens = tokens;
  plan.block_size = block_size;
  plan.window = window;
  plan.tiles = (tokens + block_size - 1) / block_size;
  plan.row_begin.assign(static_cast<size_t>(plan.tiles) + 1, 0);
  std::vector<int64_t> column_count(static_cast<size_t>(plan.tiles), 0);

  for (int64_t i = 0; i < plan.tiles; ++i) {
    const int64_t q0 = i * block_size, q1 = std::min(tokens, q0 + block_size);
    // first_visible_key never decreases with the query, so no key before the
    // tile's first query's first key is visible to any row of the tile, and
    // tiles after the diagonal see only the future.
    const int64_t first_key_tile = first_visible_key(cu, q0, window) / block_size;
    for (int64_t j = first_key_tile; j <= i; ++j) {
      const int64_t k0 = j * block_size, k1 = std::min(tokens, k0 + block_size);
      // Visible pairs exist iff the earliest query at or after k0 sees a key
      // of the tile: it has the smallest first_visible_key of the candidates.
      const int64_t probe = std::max(q0, k0);
      if (probe >= q1 || first_visible_key(cu, probe, window) > k1 - 1) continue;
      // Every pair is visible iff the earliest query sees the tile's last key
      // (causal), the latest query sees its first (window), and one
      // document spans both.
      const bool full = k1 - 1 <= q0 && (window == 0 || (q1 - 1) - k0 < window) &&
                        document_start(cu, q1 - 1) <= k0;
      plan.rows.push_back({j, full ? TileKind::kFull : TileKind::kPartial});
      ++(full ? plan.full : plan.partial);
      ++column_count[static_cast<size_t>(j)];
    }
    plan.row_begin[static_cast<size_t>(i) + 1] = static_cast<int64_t>(plan.rows.size());
  }
  plan.skipped = plan.tiles * plan.tiles - plan.full - plan.partial;

  // The transpose, by counting: columns list query tiles in increasing order
  // because rows are visited in increasing order.
  plan.column_begin.assign(static_cast<size_t>(plan.tiles) + 1, 0);
  for (int64_t j = 0; j < plan.tiles; ++j)
    plan.column_begin[static_cast<size_t>(j) + 1] =
        plan.column_begin[static_cast<size_t>(j)] + column_count[static_cast<size_t>(j)];
  plan.columns.resize(plan.rows.size());
  std::vector<int64_t> next(plan.column_begin.begin(), plan.column_begin.end() - 1);
  for (int64_t i = 0; i < plan.tiles; ++i)
    for (int64_t r = plan.row_begin[static_cast<size_t>(i)];
         r < plan.row_begin[static_cast<size_t>(i) + 1]; ++r) {
      const TileRef& ref = plan.rows[static_cast<size_t>(r)];
      plan.columns[static_cast<size_t>(next[static_cast<size_t>(ref.other)]++)] = {i, ref.kind};
    }
  return plan;
}

}  // namespace headroom
