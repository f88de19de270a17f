// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::adamw_update(Tensor& /*param*/, Tensor& /*master*/, const Tensor& /*grad*/,
                               Tensor& /*m*/, Tensor& /*v*/, const AdamWParams& /*params*/) {
  throw InternalError("adamw_update: not implemented on meta yet");
}

}  // namespace headroom
