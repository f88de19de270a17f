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
//            the causal diagonal, entirely older than the window): never read;
//   full     when every pair is visible: computed without any masking;
//   partial  otherwise: each query row keeps only its visible interval.
//
// first_visible_key never decreases with i, so the keys a query tile sees
// form one interval [first_visible_key(q0), q1 - 1], and the queries that see
// a key tile form one interval too: the computed tiles of a row (and of a
// column) are contiguous, and the plan stores two numbers per tile index,
// never a list of tiles. Host-side and backend-agnostic: a device kernel
// would upload the same ranges.
#pragma once

#include <cstdint>
#include <vector>

namespace headroom {

enum class TileKind : uint8_t { kSkipped, kFull, kPartial };

struct AttentionTilePlan {
  int64_t tokens = 0, block_size = 0, window = 0;
  int64_t tiles = 0;  // per side: ceil(tokens / block_size)
  // Tiles of the tiles x tiles square; skipped + full + partial = tiles^2.
  int64_t skipped = 0, full = 0, partial = 0;

  // Query tile i computes key tiles first_key_tile[i] .. i (forward, dq).
  std::vector<int64_t> first_key_tile;
  // Key tile j is computed by query tiles j .. last_query_tile[j] (dk, dv).
  std::vector<int64_t> last_query_tile;
  // The start of the document holding query tile i's last token: whether a
  // tile below the diagonal is one document (full) or straddles a boundary.
  std::vector<int64_t> last_row_document_start;

  // O(1); kSkipped outside the ranges above.
  TileKind kind(int64_t query_tile, int64_t key_tile) const;
};

// cu_seqlens must already be valid (check_cu_seqlens); block_size >= 1,
// window >= 0. Memory O(tiles); time O(computed tiles + tiles * log(documents))
// (the counts visit every computed tile once), never O(tokens^2).
AttentionTilePlan attention_tile_plan(const std::vector<int32_t>& cu_seqlens, int64_t tokens,
                                      int64_t block_size, int64_t window);

// The first key token query token i sees (the last is i itself).
int64_t first_visible_key(const std::vector<int32_t>& cu_seqlens, int64_t i, int64_t window);

}  // namespace headroom
