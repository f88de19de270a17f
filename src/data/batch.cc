#include "data/batch.h"

#include <algorithm>

#include "util/error.h"

namespace headroom {

void append_document(Batch& batch, const int32_t* document, int64_t length,
                     const uint8_t* loss_mask) {
  if (batch.cu_seqlens.empty()) batch.cu_seqlens.push_back(0);
  for (int64_t t = 0; t < length; ++t) {
    batch.tokens.push_back(document[t]);
    batch.positions.push_back(static_cast<int32_t>(t));
    bool has_next = t + 1 < length;
    bool counted = has_next && (loss_mask == nullptr || loss_mask[t + 1] != 0);
    batch.targets.push_back(counted ? document[t + 1] : -1);
    batch.counted += counted;
  }
  batch.cu_seqlens.push_back(static_cast<int32_t>(batch.tokens.size()));
  batch.longest = std::max(batch.longest, length);
}

void append_padding(Batch& batch, int64_t count, int32_t pad_id) {
  HR_CHECK(batch.cu_seqlens.size() >= 2, "padding follows a document");
  if (count <= 0) return;
  const int32_t row_start = batch.cu_seqlens[batch.cu_seqlens.size() - 2];
  for (int64_t i = 0; i < count; ++i) {
    batch.positions.push_back(static_cast<int32_t>(batch.size()) - row_start);
    batch.tokens.push_back(pad_id);
    batch.targets.push_back(-1);
  }
  batch.cu_seqlens.back() = static_cast<int32_t>(batch.size());
  batch.padding += count;
}

void append_padding_segment(Batch& batch, int64_t count, int32_t pad_id) {
  if (count <= 0) return;
  for (int64_t i = 0; i < count; ++i) {
    batch.positions.push_back(static_cast<int32_t>(i));
    batch.tokens.push_back(pad_id);
    batch.targets.push_back(-1);
  }
  batch.cu_seqlens.push_back(static_cast<int32_t>(batch.size()));
  batch.padding += count;
}

}  // namespace headroom
