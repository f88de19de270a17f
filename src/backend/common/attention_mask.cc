#include "backend/common/attention_mask.h"

#include <algorithm>

namespace headroom {

int64_t document_start(const std::vector<int32_t>& cu, int64_t i) {
  auto it = std::upper_bound(cu.begin(), cu.end(), i);
  return *(it - 1);
}

KeyInterval visible_keys(const AttentionMask& mask, const std::vector<int32_t>& cu, int64_t i) {
  switch (mask.kind) {
    case AttentionMaskKind::kCausal:
      return {0, i + 1};
    case AttentionMaskKind::kSlidingWindow:
      return {std::max(document_start(cu, i), i - mask.window + 1), i + 1};
    case AttentionMaskKind::kDflashBlock: {
      auto it = std::upper_bound(cu.begin(), cu.end(), i);  // the document's end
      const int64_t start = *(it - 1), end = *it;
      const int64_t block = (i - start) / mask.mask_block;
      return {start, std::min(end, start + (block + 1) * mask.mask_block)};
    }
    case AttentionMaskKind::kDocument:
      break;
  }
  return {document_start(cu, i), i + 1};
}

}  // namespace headroom
