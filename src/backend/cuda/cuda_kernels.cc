#include "backend/cuda/cuda_kernels.h"

#include "backend/cuda/make_cuda_backend.h"
#include "util/error.h"

namespace headroom {

CudaKernels::CudaKernels() : matmuls_(context_) {}

bool cuda_table_supports(Op op) {
  // Every op of the front but block-sparse flash attention (the next issue:
  // the front refuses attention.backend = "block_sparse" on cuda before it
  // allocates). One file per op under src/backend/cuda/, its kernels in
  // cuda/<op>.cu.
  return op != Op::kAttentionForward && op != Op::kAttentionBackward;
}

bool CudaKernels::supports(Op op) const {
  return cuda_table_supports(op);
}

void CudaKernels::attention_forward(const Tensor& /*q*/, const Tensor& /*k*/, const Tensor& /*v*/,
                                    const std::vector<int32_t>& /*cu_seqlens*/,
                                    const AttentionParams& /*params*/,
                                    const AttentionDims& /*dims*/, Tensor& /*out*/,
                                    Tensor& /*lse*/) {
  throw InternalError("cuda attention_forward: not in the cuda table (supports() is false)");
}

void CudaKernels::attention_backward(
    const Tensor& /*d_out*/, const Tensor& /*q*/, const Tensor& /*k*/, const Tensor& /*v*/,
    const Tensor& /*out*/, const Tensor& /*lse*/, const std::vector<int32_t>& /*cu_seqlens*/,
    const AttentionParams& /*params*/, const AttentionDims& /*dims*/,
    AttentionBackwardScratch& /*scratch*/, Tensor& /*dq*/, Tensor& /*dk*/, Tensor& /*dv*/) {
  throw InternalError("cuda attention_backward: not in the cuda table (supports() is false)");
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
