// gemm: C = alpha * op(A) op(B) + beta * C through cuBLASLt (cublaslt_matmul.h),
// A and B one dtype (fp32, bf16, fp16), C fp32 or that dtype, fp32
// accumulation. gemm_bias: C = op(A) op(B) + bias in cuBLASLt's bias epilogue
// (the fp32 sum rounded once to C's dtype, where the cpu's gemm + bias_forward
// rounds twice); a shape without such an algorithm gets the bias kernel after
// the product. The workspace is the backend's one cublaslt.workspace tensor
// (gemm_workspace.h), the allocation the meta plan of a cuda target shows.
// Allocates: nothing (the front's rule allocated the workspace).
#include "backend/cuda/cuda_kernels.h"

namespace headroom {

namespace {

// The front's cublaslt.workspace of this call, as cuBLASLt takes it (null and
// 0 when the front gave none).
struct Workspace {
  void* data = nullptr;
  uint64_t bytes = 0;
};

// Keeps the call's workspace tensor in `kept` (CudaKernels::cublaslt_workspace:
// the dense attention stages' products use it after the first gemm) and
// returns it as cuBLASLt takes it.
Workspace take_workspace(const GemmScratch& scratch, const Tensor*& kept) {
  const Tensor* workspace = scratch.cublaslt_workspace;
  if (workspace == nullptr) return {};
  kept = workspace;
  return {workspace->raw(), workspace->nbytes()};
}

}  // namespace

void CudaKernels::gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                       Tensor& c, float alpha, float beta, const GemmDims& dims,
                       GemmScratch& scratch) {
  const Workspace workspace = take_workspace(scratch, workspace_);
  const MatmulShape shape =
      dense_matmul_shape(dims.m, dims.n, dims.k, transpose_a, transpose_b, a.dtype(), c.dtype());
  if (dims.k == 0) {
    // op(A) op(B) is all zeros: C = beta * C, which cuBLASLt does not take
    // with k = 0.
    if (beta == 0)
      fill(c, 0.0f);
    else if (beta != 1)
      scale(c, beta);
    return;
  }
  matmuls_.run(shape, a.raw(), b.raw(), c.raw(), alpha, beta, workspace.data, workspace.bytes);
}

void CudaKernels::gemm_bias(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                            Tensor& c, const Tensor& bias, const GemmDims& dims,
                            GemmScratch& scratch) {
  const Workspace workspace = take_workspace(scratch, workspace_);
  const MatmulShape shape =
      dense_matmul_shape(dims.m, dims.n, dims.k, transpose_a, transpose_b, a.dtype(), c.dtype());
  if (dims.k > 0 && matmuls_.run_with_bias(shape, a.raw(), b.raw(), c.raw(), bias.raw(),
                                           workspace.data, workspace.bytes))
    return;
  gemm(a, transpose_a, b, transpose_b, c, 1.0f, 0.0f, dims, scratch);
  bias_forward(c, bias);
}

}  // namespace headroom
