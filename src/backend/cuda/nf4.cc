// nf4_quantize / nf4_dequantize on cuda: bitsandbytes' quantize_4bit and
// dequantize_4bit for "nf4", blocksize 64 (cpu/nf4.cc has the formulas;
// backend/common/nf4.h the format), by the kernels of cuda/nf4.cu: w and
// out fp32, bf16 or fp16. With double quantization the fp32 absmax goes
// to the front's scratch first (quantize: computed there, then quantized
// into q.absmax / absmax2 / offset; dequantize: rebuilt there from them).
// Numerics: the cpu's to the bit (the same nf4_code and quantize_to_map,
// fp32 with no contraction, the mean of the absmax summed in double in index
// order). Deterministic. Allocates: nothing.
#include <algorithm>
#include <string>

#include "backend/common/dynamic_map.h"
#include "backend/common/nf4.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_optimizer.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

// The signed dynamic map, the code book of double quantization.
const cuda::DynamicMap& signed_map() {
  static const cuda::DynamicMap kMap = [] {
    cuda::DynamicMap m{};
    std::copy(dynamic_map(true).begin(), dynamic_map(true).end(), m.values);
    return m;
  }();
  return kMap;
}

const cuda::Nf4Values& values() {
  static const cuda::Nf4Values kValues = [] {
    cuda::Nf4Values v{};
    std::copy(nf4_values().begin(), nf4_values().end(), v.values);
    return v;
  }();
  return kValues;
}

}  // namespace

void CudaKernels::nf4_quantize(const Tensor& w, Tensor& scratch, Nf4Weight& q) {
  const int64_t n = w.numel();
  if (n == 0) return;
  float* absmax = q.double_quant() ? scratch.data<float>() : q.absmax.data<float>();
  uint8_t* codes = q.codes.data<uint8_t>();
  switch (w.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::nf4_quantize_f32(w.data<float>(), n, codes, absmax, stream()));
      break;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::nf4_quantize_bf16(bits16(w), n, codes, absmax, stream()));
      break;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::nf4_quantize_f16(bits16(w), n, codes, absmax, stream()));
      break;
    default:
      refuse_cuda_dtype("nf4_quantize", w.dtype());
  }
  if (!q.double_quant()) return;
  HR_CUDA_CHECK(cuda::nf4_double_quantize(absmax, scratch.numel(), q.absmax.data<uint8_t>(),
                                          q.absmax2.data<float>(), q.offset.data<float>(),
                                          signed_map(), stream()));
}

void CudaKernels::nf4_dequantize(const Nf4Weight& q, Tensor& scratch, Tensor& out) {
  const int64_t n = q.numel();
  if (n == 0) return;
  const float* absmax;
  if (q.double_quant()) {
    float* rebuilt = scratch.data<float>();
    HR_CUDA_CHECK(cuda::nf4_rebuild_absmax(q.absmax.data<uint8_t>(), q.absmax2.data<float>(),
                                           q.offset.data<float>(), scratch.numel(), rebuilt,
                                           signed_map(), stream()));
    absmax = rebuilt;
  } else {
    absmax = q.absmax.data<float>();
  }
  const uint8_t* codes = q.codes.data<uint8_t>();
  switch (out.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(
          cuda::nf4_dequantize_f32(codes, absmax, n, out.data<float>(), values(), stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::nf4_dequantize_bf16(codes, absmax, n, bits16(out), values(), stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::nf4_dequantize_f16(codes, absmax, n, bits16(out), values(), stream()));
      return;
    default:
      refuse_cuda_dtype("nf4_dequantize", out.dtype());
  }
}

}  // namespace headroom
