#include "backend/cuda/cuda_kernels.h"

#include "backend/cuda/make_cuda_backend.h"
#include "util/error.h"

namespace headroom {

CudaKernels::CudaKernels() : matmuls_(context_) {}

bool cuda_table_supports(Op /*op*/) {
  // Every op of the front: one file per op under src/backend/cuda/, its
  // kernels in cuda/<op>.cu.
  return true;
}

bool CudaKernels::supports(Op op) const {
  return cuda_table_supports(op);
}

std::unique_ptr<Backend> make_cuda_backend(Allocator& allocator,
                                           uint64_t cublaslt_workspace_bytes) {
  require_cuda_device();
  auto kernels = std::make_unique<CudaKernels>();
  return std::make_unique<Backend>(allocator, BackendKind::kCuda, TargetDevice::kCuda,
                                   make_cuda_gemm_workspace(cublaslt_workspace_bytes),
                                   std::move(kernels));
}

}  // namespace headroom
