// adamw8bit_update on cuda: one step of bitsandbytes' blockwise 8-bit AdamW
// (cpu/adamw8bit.cc has the formula) by the kernel of cuda/adamw8bit.cu, one
// thread block per block of 256 elements; param fp32 (no master), bf16 or
// fp16 (master fp32, of param's dtype, or none: cpu/weight_update.h); grad
// param's dtype; m, v uint8 codes and m_absmax, v_absmax fp32, in place.
// Numerics: the scalars are computed here on the host exactly as the cpu's
// (double, rounded to fp32; 1 - beta in fp32), the maps and the codes are
// backend/common/dynamic_map.h's, and the per-element fp32 math is the
// cpu's with the FMAs its AVX2 / AVX-512 clones contract (cuda/adamw8bit.cu
// names them). Blocks are independent and each absmax is a maximum:
// deterministic. Allocates: nothing (the maps travel as kernel parameters).
#include <algorithm>
#include <string>

#include "backend/common/adamw_scalars.h"
#include "backend/common/dynamic_map.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_optimizer.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

// CpuKernels::adamw8bit_update's scalars: backend/common/adamw_scalars.h's.
cuda::AdamW8bitScalars scalars_of(const AdamWParams& params) {
  cuda::AdamW8bitScalars s{};
  set_adamw8bit_scalars(params, s);
  return s;
}

const cuda::DynamicMap& device_map(bool is_signed) {
  static const cuda::DynamicMap kMaps[2] = {
      [] {
        cuda::DynamicMap m{};
        std::copy(dynamic_map(false).begin(), dynamic_map(false).end(), m.values);
        return m;
      }(),
      [] {
        cuda::DynamicMap m{};
        std::copy(dynamic_map(true).begin(), dynamic_map(true).end(), m.values);
        return m;
      }()};
  return kMaps[is_signed ? 1 : 0];
}

// The master case of a 16-bit param (the front let through fp32, param's
// dtype, or none).
cuda::MasterKind master_kind_of(const Tensor& master) {
  if (!master.defined()) return cuda::MasterKind::kNone;
  return master.dtype() == DType::kF32 ? cuda::MasterKind::kF32 : cuda::MasterKind::kParamDtype;
}

}  // namespace

void CudaKernels::adamw8bit_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                                   Tensor& v, Tensor& m_absmax, Tensor& v_absmax,
                                   const AdamWParams& params) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const cuda::AdamW8bitScalars s = scalars_of(params);
  const cuda::DynamicMap& map_s = device_map(true);
  const cuda::DynamicMap& map_u = device_map(false);
  void* master_data = master.defined() ? master.raw() : nullptr;
  uint8_t* mc = m.data<uint8_t>();
  uint8_t* vc = v.data<uint8_t>();
  float* ma = m_absmax.data<float>();
  float* va = v_absmax.data<float>();
  switch (param.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::adamw8bit_update_f32(param.data<float>(), grad.data<float>(), mc, vc, ma,
                                               va, n, s, map_s, map_u, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::adamw8bit_update_bf16(bits16(param), master_data, master_kind_of(master),
                                                bits16(grad), mc, vc, ma, va, n, s, map_s, map_u,
                                                stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::adamw8bit_update_f16(bits16(param), master_data, master_kind_of(master),
                                               bits16(grad), mc, vc, ma, va, n, s, map_s, map_u,
                                               stream()));
      return;
    default:
      refuse_cuda_dtype("adamw8bit_update", param.dtype());
  }
}

}  // namespace headroom
