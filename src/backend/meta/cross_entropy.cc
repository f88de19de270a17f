// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::cross_entropy_forward(const Tensor& /*logits*/, const Tensor& /*targets*/,
                                        Tensor& /*lse*/, Tensor& /*loss_sum*/) {
  throw InternalError("cross_entropy_forward: not implemented on meta yet");
}

void MetaBackend::cross_entropy_backward(Tensor& /*logits*/, const Tensor& /*targets*/,
                                         const Tensor& /*lse*/, float /*scale*/) {
  throw InternalError("cross_entropy_backward: not implemented on meta yet");
}

}  // namespace headroom
