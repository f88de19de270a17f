// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::rope_forward(Tensor& /*x*/, const Tensor& /*positions*/, int64_t /*head_dim*/,
                              float /*theta*/) {
  throw InternalError("rope_forward: not implemented on cpu yet");
}

void CpuBackend::rope_backward(Tensor& /*dx*/, const Tensor& /*positions*/, int64_t /*head_dim*/,
                               float /*theta*/) {
  throw InternalError("rope_backward: not implemented on cpu yet");
}

}  // namespace headroom
