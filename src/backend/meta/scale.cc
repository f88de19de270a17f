// scale on meta: cpu/scale.cc's check; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::scale(Tensor& x, float /*alpha*/) {
  check_scale(kind(), x);
}

}  // namespace headroom
