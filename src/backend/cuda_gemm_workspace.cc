// cuBLASLt's workspace rule (gemm_workspace.h): pure arithmetic, no CUDA, so
// any host plans a cuda run with the same events.
#include "backend/backend.h"
#include "backend/gemm_workspace.h"

namespace headroom {

namespace {

class CudaGemmWorkspace final : public GemmWorkspace {
 public:
  explicit CudaGemmWorkspace(uint64_t bytes) : bytes_(bytes) {}

  GemmScratch allocate(const Backend& backend, const GemmKey& /*key*/, const Tensor& /*a*/,
                       const Tensor& /*b*/, const Tensor& /*c*/) override {
    // PyTorch likewise holds one workspace per (handle, stream) for the
    // process's life rather than one per call: the algorithm search and the
    // call itself then never allocate.
    if (!workspace_.defined())
      workspace_ = backend.empty({static_cast<int64_t>(bytes_)}, DType::kU8, Category::kWorkspace,
                                 "cublaslt.workspace");
    GemmScratch scratch;
    scratch.cublaslt_workspace = &workspace_;
    return scratch;
  }

 private:
  uint64_t bytes_;
  Tensor workspace_;
};

}  // namespace

std::unique_ptr<GemmWorkspace> make_cuda_gemm_workspace(uint64_t bytes) {
  return std::make_unique<CudaGemmWorkspace>(bytes);
}

}  // namespace headroom
