#include <string>

#include "backend/backend.h"
#include "backend/kernels.h"
#include "util/error.h"

namespace headroom {

std::unique_ptr<Backend> make_meta_backend(Allocator& allocator, TargetDevice target,
                                           uint64_t cublaslt_workspace_bytes) {
  std::unique_ptr<GemmWorkspace> rule = target == TargetDevice::kCuda
                                            ? make_cuda_gemm_workspace(cublaslt_workspace_bytes)
                                            : make_host_cpu_gemm_workspace();
  return std::make_unique<Backend>(allocator, BackendKind::kMeta, target, std::move(rule), nullptr);
}

std::unique_ptr<Backend> make_backend(BackendKind kind, TargetDevice target, Allocator& allocator,
                                      uint64_t cublaslt_workspace_bytes) {
  switch (kind) {
    case BackendKind::kMeta:
      return make_meta_backend(allocator, target, cublaslt_workspace_bytes);
    case BackendKind::kCpu:
      if (target == TargetDevice::kHostCpu) return make_cpu_backend(allocator);
      break;
    case BackendKind::kCuda:
      break;
  }
  throw InternalError("make_backend: no " + std::string(name_of(kind)) + " backend for target " +
                      std::string(name_of(target)));
}

}  // namespace headroom
