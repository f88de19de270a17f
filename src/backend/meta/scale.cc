// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::scale(Tensor& /*x*/, float /*alpha*/) {
  throw InternalError("scale: not implemented on meta yet");
}

}  // namespace headroom
