// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::rmsnorm_forward(const Tensor& /*x*/, const Tensor& /*w*/, float /*eps*/,
                                  Tensor& /*y*/, Tensor& /*rstd*/) {
  throw InternalError("rmsnorm_forward: not implemented on meta yet");
}

void MetaBackend::rmsnorm_backward(const Tensor& /*dy*/, const Tensor& /*x*/, const Tensor& /*w*/,
                                   const Tensor& /*rstd*/, Tensor& /*dx*/, Tensor& /*dw*/) {
  throw InternalError("rmsnorm_backward: not implemented on meta yet");
}

}  // namespace headroom
