// cross_entropy on meta: cpu/cross_entropy.cc's checks; allocates nothing, as
// cpu does. Target values are not checked: a plan has no values.
#include "backend/cross_entropy_checks.h"
#include "backend/meta/meta_backend.h"

namespace headroom {

void MetaBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                        Tensor& loss_sum) {
  check_cross_entropy_forward(kind(), logits, targets, lse, loss_sum);
}

void MetaBackend::cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                                         float scale) {
  check_cross_entropy_backward(kind(), logits, targets, lse, scale);
}

}  // namespace headroom
