// The block mask of a packed batch: which (query tile, key tile) pairs of
// block-sparse attention are computed, and how.
//
// The T axis is cut into tiles of block_size tokens (the last one ragged).
// Query token i sees key token j exactly when both lie in the same document,
// j <= i, and (window > 0) i - j < window. Positions are counted within the
// document, but i - j is the same difference in global indices, so the rule
// needs no positions. For each query token the visible keys are therefore
// one interval, [first_visible_key(i), i], which always holds i itself: no
// query row is ever empty, so softmax never divides by zero.
//
// A tile is
//   skipped  when no pair in it is visible (another document, entirely above
//            the causal diagonal, entirely older than the window): never touched;
//   full     when every pair is visible: computed without any masking;
//   partial  otherwise: each query row keeps only its visible interval.
// Host-side and backend-agnostic: the cpu kernels iterate it; a device
// kernel would upload the same lists.
#pragma once

#include <cstdint>
#include <vector>

namespace headroom {

enum class TileKind : uint8_t { kSkipped, kFull, kPartial };

// One computed tile as seen from its row (query tile) or its column (key tile).
struct TileRef {
  int64_t other;  // the key tile (in a row list) or the query tile (in a column list)
  TileKind kind;  // kFull or kPartial, never kSkipped
};

struct AttentionTilePlan {
  int64_t tokens = 0, block_size = 0, window = 0;
  int64_t tiles = 0;  // per side: ceil(tokens / block_size)
  // Tiles of the tiles x tiles grid; skipped + full + partial = tiles^2.
  int64_t skipped = 0, full = 0, partial = 0;

  // Query tile i computes rows[row_begin[i] .. row_begin[i + 1]): its key
  // tiles in increasing order (forward, and backward's dq pass).
  std::vector<int64_t> row_begin;
  std::vector<TileRef> rows;
  // Key tile j computes columns[column_begin[j] .. column_begin[j + 1]): its
  // query tiles in increasing order (backward's dk / dv pass).
  std::vector<int64_t> column_begin;
  std::vector<TileRef> columns;
};

// cu_seqlens must already be valid (check_cu_seqlens); block_size >= 1,
// window >= 0. Cost: O(computed tiles + tiles + log(documents) per tile),
// never O(tokens^2).
AttentionTilePlan attention_tile_plan(const std::vector<int32_t>& cu_seqlens, int64_t tokens,
                                      int64_t block_size, int64_t window);

// The first key token query token i sees (the last is i itself).
int64_t first_visible_key(const std::vector<int32_t>& cu_seqlens, int64_t i, int64_t window);

}  // namespace headroom
