// Host transfer on meta: cpu/host_transfer.cc's checks. copy_from_host
// stores nothing (a plan has no values); copy_to_host writes zeros, so a
// caller that reads a loss or a norm back gets a defined, finite value.
// Allocates nothing, as cpu does.
#include <cstring>

#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::copy_from_host(const void* src, Tensor& dst) {
  check_copy_from_host(kind(), src, dst);
}

void MetaBackend::copy_to_host(const Tensor& src, void* dst) {
  check_copy_to_host(kind(), src, dst);
  if (src.nbytes() > 0) std::memset(dst, 0, src.nbytes());
}

}  // namespace headroom
