// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::adamw_update(Tensor& /*param*/, Tensor& /*master*/, const Tensor& /*grad*/,
                              Tensor& /*m*/, Tensor& /*v*/, const AdamWParams& /*params*/) {
  throw InternalError("adamw_update: not implemented on cpu yet");
}

}  // namespace headroom
