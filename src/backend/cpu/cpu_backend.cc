#include "backend/cpu/cpu_backend.h"

namespace headroom {

std::unique_ptr<Backend> make_cpu_backend(Allocator& allocator) {
  return std::make_unique<CpuBackend>(allocator);
}

}  // namespace headroom
