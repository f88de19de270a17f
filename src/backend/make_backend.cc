#include <string>

#include "backend/backend.h"
#include "backend/kernels.h"
#include "util/error.h"

#ifdef HEADROOM_HAVE_CUDA
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/make_cuda_backend.h"
#include "kernels_flash_attention.h"  // cuda/: which head_dims flash attention has
#endif

namespace headroom {

namespace {

#ifndef HEADROOM_HAVE_CUDA
constexpr const char* kBuiltWithoutCuda =
    "run.backend = \"cuda\": this headroom was built without the CUDA toolkit (no nvcc "
    "when it was configured); rebuild on a machine with /usr/local/cuda, or plan it with "
    "`headroom plan` (it plans run.backend = \"cuda\" for the GPU)";
#endif

}  // namespace

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
      if (target != TargetDevice::kCuda) break;
#ifdef HEADROOM_HAVE_CUDA
      return make_cuda_backend(allocator, cublaslt_workspace_bytes);
#else
      throw UsageError(kBuiltWithoutCuda);
#endif
  }
  throw InternalError("make_backend: no " + std::string(name_of(kind)) + " backend for target " +
                      std::string(name_of(target)));
}

void require_cuda_run(bool block_sparse, int64_t head_dim) {
#ifdef HEADROOM_HAVE_CUDA
  require_cuda_device();
  std::string missing;
  for (Op op : all_ops())
    if (!cuda_table_supports(op))
      missing += (missing.empty() ? "" : ", ") + std::string(name_of(op));
  if (!missing.empty())
    throw UsageError("run.backend = \"cuda\": the cuda kernel table has no kernel yet for " +
                     missing +
                     "; train on run.backend = \"cpu\", or plan the cuda run with `headroom plan` "
                     "(it plans run.backend = \"cuda\" for the GPU)");
  if (block_sparse && !cuda::flash_attention_head_dim_supported(head_dim))
    throw UsageError(
        "run.backend = \"cuda\": attention.backend = \"block_sparse\" has cuda "
        "kernels for head_dim 64 and 128, and this model's is " +
        std::to_string(head_dim) +
        "; set attention.backend = \"dense_additive\", or train on run.backend = "
        "\"cpu\"");
#else
  (void)block_sparse;
  (void)head_dim;
  throw UsageError(kBuiltWithoutCuda);
#endif
}

}  // namespace headroom
