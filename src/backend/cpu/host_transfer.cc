// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::copy_from_host(const void* /*src*/, Tensor& /*dst*/) {
  throw InternalError("copy_from_host: not implemented on cpu yet");
}

void CpuBackend::copy_to_host(const Tensor& /*src*/, void* /*dst*/) {
  throw InternalError("copy_to_host: not implemented on cpu yet");
}

}  // namespace headroom
