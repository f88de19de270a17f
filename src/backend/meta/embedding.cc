// embedding on meta: cpu/embedding.cc's checks (the shapes; ids' values are
// not known to a plan), and backward's workspace, allocated by the same helper
// cpu uses and freed on return. Forward allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_embedding_forward(kind(), table, ids, out);
}

void MetaBackend::embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table) {
  check_embedding_backward(kind(), d_out, ids, d_table);
  // Held for the call and freed on return, as cpu holds its order.
  Tensor order = allocate_embedding_backward_order(*this, ids);
}

}  // namespace headroom
