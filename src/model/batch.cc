#include "model/batch.h"

#include <algorithm>

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

}  // namespace headroom
