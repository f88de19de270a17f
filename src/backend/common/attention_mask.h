// Which keys a query of a packed (THD) batch may attend to: the attention
// mask as a predicate, written once for every backend, the tile plan
// (attention_tiles.h) and every kernel's partially masked tiles.
//
// Tokens are indexed globally, 0 .. T-1; documents are [cu[d], cu[d+1]).
// For query i in document [s, e) the visible keys are one interval
// [lo(i), hi(i)):
//
//   kind             lo(i)                 hi(i)
//   document         s                     i + 1
//   causal           0                     i + 1
//   sliding_window   max(s, i - w + 1)     i + 1
//   dflash_block     s                     min(e, s + (b(i) + 1) * m)
//
// with w = window and, for dflash_block, m = mask_block and b(i) = (i - s) / m
// the block of i counted from its document's start. dflash_block is DFlash-
// LoRA's mask (SpecForge's `_get_or_create_block_mask` with Q_LEN ==
// KV_LEN): each document is cut into blocks of m tokens from its first
// token, a block attends bidirectionally to itself and fully to every earlier
// block of its document (its context), never to a later block; the last
// block may be shorter. m = 1 is exactly "document". "causal" is what naive
// packing does: one causal sequence across document boundaries.
//
// Every row holds its own token: lo(i) <= i < hi(i) for every kind, so no
// query row is empty and softmax never divides by zero (the row's maximum
// contributes exp(0) = 1 to its sum). Both lo and hi never decrease with i
// (within a document by the formulas; across a boundary lo jumps to the new
// document's start and hi past the old document's end), which is what keeps
// the tile plan's ranges contiguous.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/common/rng.h"  // HEADROOM_HOST_DEVICE

namespace headroom {

enum class AttentionMaskKind : uint8_t { kDocument, kCausal, kSlidingWindow, kDflashBlock };

constexpr std::string_view name_of(AttentionMaskKind kind) {
  switch (kind) {
    case AttentionMaskKind::kDocument:
      return "document";
    case AttentionMaskKind::kCausal:
      return "causal";
    case AttentionMaskKind::kSlidingWindow:
      return "sliding_window";
    case AttentionMaskKind::kDflashBlock:
      return "dflash_block";
  }
  return "?";
}

// The mask's parameters. window >= 1 exactly for sliding_window (0
// otherwise); mask_block >= 1 exactly for dflash_block (0 otherwise): the
// front checks this (attention_checks.h), so no kind falls back to a default.
struct AttentionMask {
  AttentionMaskKind kind = AttentionMaskKind::kDocument;
  int64_t window = 0;
  int64_t mask_block = 0;

  // nvcc compiles the cuda kernels (which read this struct) as C++17, which
  // has no defaulted comparisons.
#if __cplusplus >= 202002L
  bool operator==(const AttentionMask&) const = default;
#endif
};

// The visible keys of query token i: [lo, hi).
struct KeyInterval {
  int64_t lo = 0, hi = 0;
};

// The visible keys of query token i of the document [start, end) that holds
// it: the table above for a caller that already found the document (cuda's
// dense mask kernel, which has no std::vector to search; visible_keys
// finds the document and calls it, so host and device share one formula).
HEADROOM_HOST_DEVICE inline KeyInterval visible_keys_in_document(const AttentionMask& mask,
                                                                 int64_t start, int64_t end,
                                                                 int64_t i) {
  switch (mask.kind) {
    case AttentionMaskKind::kCausal:
      return {0, i + 1};
    case AttentionMaskKind::kSlidingWindow: {
      const int64_t lo = i - mask.window + 1;
      return {lo > start ? lo : start, i + 1};
    }
    case AttentionMaskKind::kDflashBlock: {
      const int64_t hi = start + ((i - start) / mask.mask_block + 1) * mask.mask_block;
      return {start, hi < end ? hi : end};
    }
    case AttentionMaskKind::kDocument:
      break;
  }
  return {start, i + 1};
}

// The document holding token i among `count` documents given by their
// offsets (offsets[0] <= i < offsets[count], never decreasing): the last d
// with offsets[d] <= i, so an empty document (a repeated offset) holds
// nothing. document_start's search for the cuda kernels, which get the
// offsets by value and have no std::vector to search. O(log count).
HEADROOM_HOST_DEVICE inline int document_of(const int32_t* offsets, int count, int64_t i) {
  int lo = 0, hi = count;  // offsets[lo] <= i < offsets[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (offsets[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// cu must be valid (check_cu_seqlens) and 0 <= i < cu.back(). O(log documents).
KeyInterval visible_keys(const AttentionMask& mask, const std::vector<int32_t>& cu, int64_t i);

// The start of the document holding token i (0 <= i < cu.back()): the last
// offset <= i, so an empty document (a repeated offset) holds nothing.
int64_t document_start(const std::vector<int32_t>& cu, int64_t i);

}  // namespace headroom
