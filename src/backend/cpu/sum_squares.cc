// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::sum_squares(const Tensor& /*x*/, Tensor& /*out*/) {
  throw InternalError("sum_squares: not implemented on cpu yet");
}

}  // namespace headroom
