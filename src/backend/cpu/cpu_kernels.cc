#include "backend/cpu/cpu_kernels.h"

namespace headroom {

std::unique_ptr<Backend> make_cpu_backend(Allocator& allocator) {
  // The table executes the plans its own gemm rule made, so the pair is built
  // together and the rule outlives the table (Backend's member order).
  auto workspace = std::make_unique<HostCpuGemmWorkspace>();
  auto kernels = std::make_unique<CpuKernels>(workspace->plans());
  return std::make_unique<Backend>(allocator, BackendKind::kCpu, TargetDevice::kHostCpu,
                                   std::move(workspace), std::move(kernels));
}

}  // namespace headroom
