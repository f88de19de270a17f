// fill_uniform on meta: cpu/fill_uniform.cc's check; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/op_checks.h"

namespace headroom {

void MetaBackend::fill_uniform(Tensor& x, uint64_t /*seed*/, float lo, float hi) {
  check_fill_uniform(kind(), x, lo, hi);
}

}  // namespace headroom
