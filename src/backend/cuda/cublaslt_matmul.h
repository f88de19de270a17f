// Row-major (batched) matrix products through cuBLASLt, for gemm and for the
// dense attention stages: fp32 accumulation and scaling whatever the operand
// dtypes (bf16, fp16, fp32; C fp32 or the operands' dtype), as the cpu's
// oneDNN path does. fp32 operands are multiplied in full fp32 (no TF32),
// PyTorch's default (torch.backends.cuda.matmul.allow_tf32 = False).
//
// cuBLASLt is column-major; a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so the operands are handed over swapped and every
// layout is described as stored. One algorithm per distinct product (its
// MatmulKey), chosen once by cuBLASLt's heuristic and kept: the same product
// then always runs the same algorithm, which is what makes it give the same
// bits on every run (cuBLAS's reproducibility rule: same algorithm, same
// architecture, one stream).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include <cublasLt.h>

#include "backend/cuda/cuda_context.h"
#include "tensor/dtype.h"

namespace headroom {

// C[i] (m x n, row stride ldc) = alpha * op(A[i]) op(B[i]) + beta * C[i] for
// i < batch, where A[i] starts stride_a elements after A[i - 1]. op(A) is
// m x k: A is stored m x k (row stride lda) or, transposed, k x m. Likewise
// op(B) is k x n. beta = 0 never reads C (NaN there is overwritten).
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  bool transpose_a = false, transpose_b = false;
  DType ab = DType::kF32;  // A's and B's dtype
  DType c = DType::kF32;
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides as stored, in elements
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  auto operator<=>(const MatmulShape&) const = default;
};

// A row-major shape's default strides: dense rows, dense batches.
MatmulShape dense_matmul_shape(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                               DType ab, DType c, int64_t batch = 1);

class CublasLtMatmuls {
 public:
  explicit CublasLtMatmuls(const CudaContext& context) : context_(&context) {}
  ~CublasLtMatmuls();
  CublasLtMatmuls(const CublasLtMatmuls&) = delete;
  CublasLtMatmuls& operator=(const CublasLtMatmuls&) = delete;

  // Issues the product on the context's stream. `workspace` (workspace_bytes,
  // 256-byte aligned, may be null with 0 bytes) is the backend's cuBLASLt
  // workspace; an algorithm is chosen among those that fit it, once per
  // (shape, alpha != 0 ? , beta != 0) and workspace size.
  void run(const MatmulShape& shape, const void* a, const void* b, void* c, float alpha, float beta,
           void* workspace, uint64_t workspace_bytes);
  // C = op(A) op(B) + bias (n values of C's dtype, one per column of C, the
  // same for every batch) with cuBLASLt's bias epilogue: the sum is rounded
  // to C's dtype once. Returns false, having issued nothing, when cuBLASLt has
  // no algorithm with that epilogue for the shape within the workspace; the
  // caller then adds the bias itself.
  [[nodiscard]] bool run_with_bias(const MatmulShape& shape, const void* a, const void* b, void* c,
                                   const void* bias, void* workspace, uint64_t workspace_bytes);

  // How many distinct products have an algorithm (for tests and benches).
  size_t plans() const { return plans_.size(); }

 private:
  struct Plan;
  // shape, beta != 0, bias epilogue, workspace bytes
  using Key = std::tuple<MatmulShape, bool, bool, uint64_t>;
  // The plan of the key; with_bias plans that found no algorithm are kept
  // too (algo_found false), so the heuristic is asked once.
  Plan& plan_for(const MatmulShape& shape, bool accumulate, bool with_bias,
                 uint64_t workspace_bytes);

  const CudaContext* context_;
  std::map<Key, Plan*> plans_;
};

}  // namespace headroom
