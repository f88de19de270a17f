// add on meta: cpu/add.cc's check; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/op_checks.h"

namespace headroom {

void MetaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  check_add(kind(), a, b, out);
}

}  // namespace headroom
