// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::cross_entropy_forward(const Tensor& /*logits*/, const Tensor& /*targets*/,
                                       Tensor& /*lse*/, Tensor& /*loss_sum*/) {
  throw InternalError("cross_entropy_forward: not implemented on cpu yet");
}

void CpuBackend::cross_entropy_backward(Tensor& /*logits*/, const Tensor& /*targets*/,
                                        const Tensor& /*lse*/, float /*scale*/) {
  throw InternalError("cross_entropy_backward: not implemented on cpu yet");
}

}  // namespace headroom
