// gemm on meta: cpu/gemm.cc's check, then the target's allocations. For the
// host cpu: cpu's plan for the same key (same oneDNN descriptor, so the same
// route and scratchpad size) and the same GemmScratch, held for the call and
// freed in the same order as on cpu. For cuda: cuBLASLt's one workspace,
// taken on the first gemm and kept (backend/target_device.h); nothing per call.
#include "backend/meta/meta_backend.h"
#include "backend/op_checks.h"

namespace headroom {

void MetaBackend::gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                       Tensor& c, float alpha, float beta) {
  GemmDims dims = check_gemm(kind(), a, transpose_a, b, transpose_b, c);
  if (target_ == TargetDevice::kCuda) {
    if (!cublaslt_workspace_.defined())
      cublaslt_workspace_ = empty({static_cast<int64_t>(kCublasLtWorkspaceBytes)}, DType::kU8,
                                  Category::kWorkspace, "cublaslt.workspace");
    return;
  }
  const GemmPlan& plan = gemm_plans_.get(
      make_gemm_key(dims, transpose_a, transpose_b, a.dtype(), c.dtype(), alpha, beta));
  GemmScratch scratch = allocate_gemm_scratch(*this, plan, a, b, c);
}

}  // namespace headroom
