#include "backend/meta/meta_backend.h"

namespace headroom {

std::unique_ptr<Backend> make_meta_backend(Allocator& allocator, TargetDevice target) {
  return std::make_unique<MetaBackend>(allocator, target);
}

}  // namespace headroom
