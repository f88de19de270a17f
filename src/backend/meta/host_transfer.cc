// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::copy_from_host(const void* /*src*/, Tensor& /*dst*/) {
  throw InternalError("copy_from_host: not implemented on meta yet");
}

void MetaBackend::copy_to_host(const Tensor& /*src*/, void* /*dst*/) {
  throw InternalError("copy_to_host: not implemented on meta yet");
}

}  // namespace headroom
