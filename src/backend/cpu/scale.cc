// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::scale(Tensor& /*x*/, float /*alpha*/) {
  throw InternalError("scale: not implemented on cpu yet");
}

}  // namespace headroom
