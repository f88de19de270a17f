// dropout on meta: cpu/dropout.cc's check; allocates nothing, as cpu does
// (the mask is recomputed from the seed, never stored).
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::dropout(const Tensor& x, float p, uint64_t /*seed*/, Tensor& out) {
  check_dropout(kind(), x, p, out);
}

}  // namespace headroom
