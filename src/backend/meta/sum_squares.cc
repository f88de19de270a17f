// sum_squares on meta: cpu/sum_squares.cc's check; allocates nothing, as cpu
// does (its partial sums live on the stack).
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::sum_squares(const Tensor& x, Tensor& out) {
  check_sum_squares(kind(), x, out);
}

}  // namespace headroom
