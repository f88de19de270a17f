#include "backend/cuda/cublaslt_matmul.h"

#include <memory>
#include <string>

#include "backend/cuda/cublaslt_library.h"
#include "backend/cuda/cuda_check.h"
#include "util/error.h"

namespace headroom {

namespace {

cudaDataType_t cuda_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      throw InternalError("cublaslt matmul: no cuBLASLt type for " + std::string(name_of(dtype)));
  }
}

// A stored row-major matrix of `rows` x `cols` (row stride ld) is, column-major,
// cols x rows with leading dimension ld.
cublasLtMatrixLayout_t make_layout(DType dtype, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatrixLayoutCreate(
      &layout, cuda_type_of(dtype), static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return layout;
}

std::string describe(const MatmulShape& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         " batch=" + std::to_string(s.batch) + (s.transpose_a ? " A^T" : " A") +
         (s.transpose_b ? " B^T " : " B ") + std::string(name_of(s.ab)) + " -> " +
         std::string(name_of(s.c));
}

}  // namespace

MatmulShape dense_matmul_shape(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                               DType ab, DType c, int64_t batch) {
  MatmulShape s;
  s.m = m, s.n = n, s.k = k, s.batch = batch;
  s.transpose_a = transpose_a, s.transpose_b = transpose_b;
  s.ab = ab, s.c = c;
  s.lda = transpose_a ? m : k;
  s.ldb = transpose_b ? k : n;
  s.ldc = n;
  s.stride_a = m * k, s.stride_b = k * n, s.stride_c = m * n;
  return s;
}

struct CublasLtMatmuls::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  // Swapped (module comment): cuBLASLt's A is our B, its B our A.
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool algo_found = false;
  ~Plan() {
    if (out) (void)cublaslt_library().cublasLtMatrixLayoutDestroy(out);
    if (second) (void)cublaslt_library().cublasLtMatrixLayoutDestroy(second);
    if (first) (void)cublaslt_library().cublasLtMatrixLayoutDestroy(first);
    if (desc) (void)cublaslt_library().cublasLtMatmulDescDestroy(desc);
  }
};

CublasLtMatmuls::~CublasLtMatmuls() {
  for (auto& [key, plan] : plans_)
    delete plan;
}

CublasLtMatmuls::Plan& CublasLtMatmuls::plan_for(const MatmulShape& s, bool accumulate,
                                                 bool with_bias, uint64_t workspace_bytes) {
  const Key key{s, accumulate, with_bias, workspace_bytes};
  if (auto found = plans_.find(key); found != plans_.end()) return *found->second;

  auto plan = std::make_unique<Plan>();
  HR_CUBLAS_CHECK(
      cublaslt_library().cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B as
  // stored, transposed when ours is; its second is A likewise.
  const cublasOperation_t op_first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  // B as stored: k x n, or n x k transposed. A: m x k, or k x m.
  plan->first = make_layout(s.ab, s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n, s.ldb,
                            s.batch, s.stride_b);
  plan->second = make_layout(s.ab, s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k, s.lda,
                             s.batch, s.stride_a);
  plan->out = make_layout(s.c, s.m, s.n, s.ldc, s.batch, s.stride_c);
  if (with_bias) {
    // Column-major C^T is n x m: the epilogue's bias has one value per row of
    // C^T, i.e. per column of our C. Its dtype defaults to C's (the front
    // checks bias has C's dtype); the pointer is set per call (run_with_bias).
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    const int64_t no_batch_stride = 0;
    HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &no_batch_stride,
        sizeof no_batch_stride));
  }

  cublasLtMatmulPreference_t preference = nullptr;
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulPreferenceCreate(&preference));
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublaslt_library().cublasLtMatmulAlgoGetHeuristic(
      context_->cublaslt(), plan->desc, plan->first, plan->second, plan->out, plan->out, preference,
      1, &result, &found);
  (void)cublaslt_library().cublasLtMatmulPreferenceDestroy(preference);
  const bool ok = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (!ok && with_bias) {
    // Not an error: run_with_bias's caller adds the bias in its own pass.
    Plan* raw = plan.release();
    plans_.emplace(key, raw);
    return *raw;
  }
  if (!ok)
    throw InternalError("cublaslt matmul: no cuBLASLt algorithm for " + describe(s) + " within " +
                        std::to_string(workspace_bytes) + " bytes of workspace (" +
                        cublas_status_name(status) + ")");
  plan->algo = result.algo;
  plan->algo_found = true;
  Plan* raw = plan.release();
  plans_.emplace(key, raw);
  return *raw;
}

void CublasLtMatmuls::run(const MatmulShape& s, const void* a, const void* b, void* c, float alpha,
                          float beta, void* workspace, uint64_t workspace_bytes) {
  if (s.m == 0 || s.n == 0 || s.batch == 0) return;
  Plan& plan = plan_for(s, beta != 0, false, workspace_bytes);
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmul(
      context_->cublaslt(), plan.desc, &alpha, b, plan.first, a, plan.second, &beta, c, plan.out, c,
      plan.out, &plan.algo, workspace, workspace_bytes, context_->stream()));
}

bool CublasLtMatmuls::run_with_bias(const MatmulShape& s, const void* a, const void* b, void* c,
                                    const void* bias, void* workspace, uint64_t workspace_bytes) {
  Plan& plan = plan_for(s, false, true, workspace_bytes);
  if (!plan.algo_found) return false;
  if (s.m == 0 || s.n == 0 || s.batch == 0) return true;
  // The descriptor is read when the product is issued, so one plan serves
  // every bias tensor of its shape.
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float alpha = 1.0f, beta = 0.0f;
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtMatmul(
      context_->cublaslt(), plan.desc, &alpha, b, plan.first, a, plan.second, &beta, c, plan.out, c,
      plan.out, &plan.algo, workspace, workspace_bytes, context_->stream()));
  return true;
}

}  // namespace headroom
