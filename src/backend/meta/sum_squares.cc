// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::sum_squares(const Tensor& /*x*/, Tensor& /*out*/) {
  throw InternalError("sum_squares: not implemented on meta yet");
}

}  // namespace headroom
