// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::rmsnorm_forward(const Tensor& /*x*/, const Tensor& /*w*/, float /*eps*/,
                                 Tensor& /*y*/, Tensor& /*rstd*/) {
  throw InternalError("rmsnorm_forward: not implemented on cpu yet");
}

void CpuBackend::rmsnorm_backward(const Tensor& /*dy*/, const Tensor& /*x*/, const Tensor& /*w*/,
                                  const Tensor& /*rstd*/, Tensor& /*dx*/, Tensor& /*dw*/) {
  throw InternalError("rmsnorm_backward: not implemented on cpu yet");
}

}  // namespace headroom
