// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::rope_forward(Tensor& /*x*/, const Tensor& /*positions*/, int64_t /*head_dim*/,
                               float /*theta*/) {
  throw InternalError("rope_forward: not implemented on meta yet");
}

void MetaBackend::rope_backward(Tensor& /*dx*/, const Tensor& /*positions*/, int64_t /*head_dim*/,
                                float /*theta*/) {
  throw InternalError("rope_backward: not implemented on meta yet");
}

}  // namespace headroom
