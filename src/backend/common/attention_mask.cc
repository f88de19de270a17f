#include "backend/common/attention_mask.h"

#include <algorithm>

namespace headroom {

int64_t document_start(const std::vector<int32_t>& cu, int64_t i) {
  auto it = std::upper_bound(cu.begin(), cu.end(), i);
  return *(it - 1);
}

KeyInterval visible_keys(const AttentionMask& mask, const std::vector<int32_t>& cu, int64_t i) {
  // causal looks at no document; the others at the one holding i. One
  // formula for host and device: visible_keys_in_document.
  if (mask.kind == AttentionMaskKind::kCausal) return visible_keys_in_document(mask, 0, 0, i);
  auto it = std::upper_bound(cu.begin(), cu.end(), i);  // the document's end
  return visible_keys_in_document(mask, *(it - 1), *it, i);
}

}  // namespace headroom
