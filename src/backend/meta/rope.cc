// rope on meta: cpu/rope.cc's checks; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) {
  check_rope("rope_forward", kind(), x, positions, head_dim, theta);
}

void MetaBackend::rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim,
                                float theta) {
  check_rope("rope_backward", kind(), dx, positions, head_dim, theta);
}

}  // namespace headroom
