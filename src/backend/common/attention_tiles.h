// The block mask of a packed batch: which (query tile, key tile) pairs of
// block-sparse attention are computed, and how.
//
// The T axis is cut into tiles of block_size tokens (the last one ragged).
// Query token i sees the keys [lo(i), hi(i)) of its mask (attention_mask.h:
// one interval per query for every kind, holding i itself, with lo and hi
// never decreasing in i). A tile is
//   skipped  when no pair in it is visible (another document, entirely above
//            the causal diagonal or a dflash block's end, entirely older than
//            the window): never read;
//   full     when every pair is visible: computed without any masking;
//   partial  otherwise: each query row keeps only its visible interval.
// The classification comes from the mask alone; no kind is special-cased.
//
// Why the plan stays O(tiles): the union of the intervals of a query tile's
// rows is one interval [lo(q0), hi(q1 - 1)) (each holds its own row, and the
// rows are consecutive), so the computed key tiles of a query tile are
// contiguous; symmetrically the queries seeing key k are an interval holding
// k, so the computed query tiles of a key tile are contiguous too. A tile
// inside those ranges always holds a visible pair. It is full iff its last
// row's lo <= its first key and its first row's hi >= its last key + 1
// (monotonicity makes the extreme rows the binding ones). So the plan stores
// a few numbers per tile index, never a list of tiles, and never a T x T
// mask. Host-side and backend-agnostic: a device kernel would upload the
// same ranges.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/common/attention_mask.h"

namespace headroom {

enum class TileKind : uint8_t { kSkipped, kFull, kPartial };

struct AttentionTilePlan {
  int64_t tokens = 0, block_size = 0;
  AttentionMask mask;
  int64_t tiles = 0;  // per side: ceil(tokens / block_size)
  // Tiles of the tiles x tiles square; skipped + full + partial = tiles^2.
  int64_t skipped = 0, full = 0, partial = 0;

  // Query tile i computes key tiles first_key_tile[i] .. last_key_tile[i]
  // (forward, dq).
  std::vector<int64_t> first_key_tile, last_key_tile;
  // Key tile j is computed by query tiles first_query_tile[j] ..
  // last_query_tile[j] (dk, dv).
  std::vector<int64_t> first_query_tile, last_query_tile;
  // lo of query tile i's last row, hi of its first row: whether a computed
  // tile is full.
  std::vector<int64_t> last_row_lo, first_row_hi;

  // O(1); kSkipped outside the ranges above.
  TileKind kind(int64_t query_tile, int64_t key_tile) const;
};

// cu_seqlens must already be valid (check_cu_seqlens) and the mask's
// parameters checked (attention_checks.h); block_size >= 1. Memory O(tiles);
// time O(computed tiles + tiles * log(documents)) (the counts visit every
// computed tile once), never O(tokens^2).
AttentionTilePlan attention_tile_plan(const std::vector<int32_t>& cu_seqlens, int64_t tokens,
                                      int64_t block_size, const AttentionMask& mask);

}  // namespace headroom
