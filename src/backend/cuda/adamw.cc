// adamw_update on cuda: one AdamW step (cpu/adamw.cc has the formula, in
// PyTorch's operation order) by the kernel of cuda/adamw.cu, for param fp32
// (no master), bf16 or fp16 (master fp32, of param's dtype, or none: the
// cases of cpu/weight_update.h); grad param's dtype, m and v fp32.
// Numerics: the scalars are computed here on the host exactly as the cpu's
// scalars_of does (double, rounded to fp32); the per-element fp32 math is
// the cpu's, with the FMAs its AVX2 / AVX-512 clones contract (cuda/adamw.cu
// names them), so the two backends agree to the bit on those machines.
// Elementwise: deterministic. Allocates: nothing.
#include <string>

#include "backend/common/adamw_scalars.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_optimizer.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

// cpu/adamw.cc's scalars_of: backend/common/adamw_scalars.h's, and the kernel's extras.
cuda::AdamWScalars scalars_of(const AdamWParams& p) {
  cuda::AdamWScalars s{};
  set_adamw_scalars(p, s);
  s.one_minus_weight = 1.0f - s.one_minus_beta1;  // lerp's (1 - w), in fp32 as the cpu's
  s.lerp_from_m = s.one_minus_beta1 < 0.5f;
  return s;
}

// The master case of a 16-bit param (the front let through fp32, param's
// dtype, or none).
cuda::MasterKind master_kind_of(const Tensor& master) {
  if (!master.defined()) return cuda::MasterKind::kNone;
  return master.dtype() == DType::kF32 ? cuda::MasterKind::kF32 : cuda::MasterKind::kParamDtype;
}

}  // namespace

void CudaKernels::adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, const AdamWParams& params) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const cuda::AdamWScalars s = scalars_of(params);
  void* master_data = master.defined() ? master.raw() : nullptr;
  switch (param.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::adamw_update_f32(param.data<float>(), grad.data<float>(), m.data<float>(),
                                           v.data<float>(), n, s, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::adamw_update_bf16(bits16(param), master_data, master_kind_of(master),
                                            bits16(grad), m.data<float>(), v.data<float>(), n, s,
                                            stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::adamw_update_f16(bits16(param), master_data, master_kind_of(master),
                                           bits16(grad), m.data<float>(), v.data<float>(), n, s,
                                           stream()));
      return;
    default:
      refuse_cuda_dtype("adamw_update", param.dtype());
  }
}

}  // namespace headroom
