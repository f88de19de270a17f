// fill on meta: cpu/fill.cc's check; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/op_checks.h"

namespace headroom {

void MetaBackend::fill(Tensor& x, float value) {
  check_fill(kind(), x, value);
}

}  // namespace headroom
