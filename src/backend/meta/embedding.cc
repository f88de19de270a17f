// STUB: replaced by the op's implementation.
#include "backend/meta/meta_backend.h"
#include "util/error.h"

namespace headroom {

void MetaBackend::embedding_forward(const Tensor& /*table*/, const Tensor& /*ids*/,
                                    Tensor& /*out*/) {
  throw InternalError("embedding_forward: not implemented on meta yet");
}

void MetaBackend::embedding_backward(const Tensor& /*d_out*/, const Tensor& /*ids*/,
                                     Tensor& /*d_table*/) {
  throw InternalError("embedding_backward: not implemented on meta yet");
}

}  // namespace headroom
