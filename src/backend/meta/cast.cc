// cast on meta: cpu/cast.cc's check, then the output, allocated like cpu's
// (same shape, dtype, category, tag), left uninitialized.
#include "backend/meta/meta_backend.h"
#include "backend/op_checks.h"

namespace headroom {

Tensor MetaBackend::cast(const Tensor& x, DType dtype, Category category, std::string_view tag) {
  check_cast(kind(), x, dtype);
  return empty(x.shape(), dtype, category, tag);
}

}  // namespace headroom
