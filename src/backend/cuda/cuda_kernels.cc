#include "backend/cuda/cuda_kernels.h"

#include "backend/cuda/make_cuda_backend.h"
#include "util/error.h"

namespace headroom {

CudaKernels::CudaKernels() : matmuls_(context_) {}

bool cuda_table_supports(Op op) {
  // The ops with cuda kernels so far (elementwise.cc, gemm.cc,
  // host_transfer.cc); the rest are not_on_cuda_yet.cc's refusals.
  switch (op) {
    case Op::kFill:
    case Op::kCopy:
    case Op::kCast:
    case Op::kAdd:
    case Op::kGemm:
    case Op::kCopyFromHost:
    case Op::kCopyToHost:
      return true;
    default:
      return false;
  }
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
