// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::embedding_forward(const Tensor& /*table*/, const Tensor& /*ids*/,
                                   Tensor& /*out*/) {
  throw InternalError("embedding_forward: not implemented on cpu yet");
}

void CpuBackend::embedding_backward(const Tensor& /*d_out*/, const Tensor& /*ids*/,
                                    Tensor& /*d_table*/) {
  throw InternalError("embedding_backward: not implemented on cpu yet");
}

}  // namespace headroom
