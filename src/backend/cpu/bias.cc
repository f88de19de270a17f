// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::bias_forward(Tensor& /*x*/, const Tensor& /*bias*/) {
  throw InternalError("bias_forward: not implemented on cpu yet");
}

void CpuBackend::bias_backward(const Tensor& /*dy*/, Tensor& /*d_bias*/) {
  throw InternalError("bias_backward: not implemented on cpu yet");
}

}  // namespace headroom
