// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::swiglu_forward(const Tensor& /*gate*/, const Tensor& /*up*/, Tensor& /*out*/) {
  throw InternalError("swiglu_forward: not implemented on meta yet");
}

void MetaBackend::swiglu_backward(const Tensor& /*d_out*/, const Tensor& /*gate*/,
                                  const Tensor& /*up*/, Tensor& /*d_gate*/, Tensor& /*d_up*/) {
  throw InternalError("swiglu_backward: not implemented on meta yet");
}

}  // namespace headroom
