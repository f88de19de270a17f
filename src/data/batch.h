// One micro-batch as the model sees it: documents packed end to end (THD).
#pragma once

#include <cstdint>
#include <vector>

namespace headroom {

struct Batch {
  std::vector<int32_t> tokens;      // (T)
  std::vector<int32_t> targets;     // (T) the next token of the same document, -1 = no loss
  std::vector<int32_t> positions;   // (T) position within its document, from 0
  std::vector<int32_t> cu_seqlens;  // (documents + 1) document starts, then T
  int64_t counted = 0;              // targets != -1
  int64_t longest = 0;              // tokens of the longest document
  int64_t padding = 0;              // tokens that are padding (padded mode)
  int64_t truncated = 0;            // documents cut to data.max_sample_tokens
  // Which micro-batch of the data it is (bin `bin` of epoch `epoch`, as the
  // Batcher planned it): the same whichever rank, world size or attempt
  // trains it, so its randomness (LoRA dropout) can be drawn from it. -1 for
  // a batch built by hand.
  int64_t epoch = -1;
  int64_t bin = -1;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

// Appends one document: within it token t predicts token t+1, the last token
// predicts nothing (L tokens give L-1 targets), and loss_mask (if not empty,
// aligned with `document`) zeroes targets whose *predicted* token has mask 0.
void append_document(Batch& batch, const int32_t* document, int64_t length,
                     const uint8_t* loss_mask = nullptr);

// Pads the last document with `count` copies of `pad_id`: it stays one
// segment of cu_seqlens (a padded row, as a dense (B, L) batch has it), its
// positions continue, the padding has no target and is counted in `padding`.
// The batch must hold a document.
void append_padding(Batch& batch, int64_t count, int32_t pad_id);

// Appends `count` copies of `pad_id` as a segment of their own (a packed
// bin's padding): positions from 0, no targets, counted in `padding` and not
// a document (`longest` ignores it). Under every attention mask no earlier
// token sees it: it is last, and a segment apart. Nothing when count <= 0.
void append_padding_segment(Batch& batch, int64_t count, int32_t pad_id);

}  // namespace headroom
