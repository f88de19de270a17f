// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::bias_forward(Tensor& /*x*/, const Tensor& /*bias*/) {
  throw InternalError("bias_forward: not implemented on meta yet");
}

void MetaBackend::bias_backward(const Tensor& /*dy*/, Tensor& /*d_bias*/) {
  throw InternalError("bias_backward: not implemented on meta yet");
}

}  // namespace headroom
