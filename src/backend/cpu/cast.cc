// cast: a new tensor holding x converted to `dtype`.
//   fp32 -> bf16: round to nearest even (to_bf16); NaN stays NaN, overflow
//                 goes to inf, as in PyTorch.
//   bf16 -> fp32: exact.
//   fp32 -> fp16: round to nearest even (to_f16); beyond 65504 to inf, below
//                 2^-14 to a subnormal, as PyTorch's .half().
//   fp16 -> fp32: exact.   bf16 <-> fp16: through fp32, one rounding.
//   int32 / int64 / uint8 -> fp32: exact below 2^24, round-to-nearest above.
//   same dtype: a copy.
// The front allocates the output (the caller's category and tag) after the
// checks, so a rejected cast allocates nothing; this fills it.
#include <cstring>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"

namespace headroom {

namespace {

template <typename T>
void integers_to_float(const T* src, float* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<float>(src[i]);
}

}  // namespace

void CpuKernels::cast(const Tensor& x, Tensor& out) {
  const DType dtype = out.dtype();
  int64_t n = x.numel();
  if (x.dtype() == dtype) {
    copy(x, out);
  } else if (x.dtype() == DType::kF32 && dtype == DType::kBF16) {
    round_to_bf16(x.data<float>(), out.data<bf16>(), n);
  } else if (x.dtype() == DType::kBF16 && dtype == DType::kF32) {
    widen_bf16(x.data<bf16>(), out.data<float>(), n);
  } else if (x.dtype() == DType::kF32 && dtype == DType::kF16) {
    round_to_f16(x.data<float>(), out.data<f16>(), n);
  } else if (x.dtype() == DType::kF16 && dtype == DType::kF32) {
    widen_f16(x.data<f16>(), out.data<float>(), n);
  } else if (is_half(x.dtype()) && is_half(dtype)) {
    // bf16 <-> fp16: through fp32 (exact), one rounding.
    with_floating_type(x.dtype(), [&]<typename S>(S*) {
      with_floating_type(dtype, [&]<typename D>(D*) {
        const S* src = x.data<S>();
        D* dst = out.data<D>();
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
        for (int64_t i = 0; i < n; ++i)
          store(dst + i, widen(src[i]));
      });
    });
  } else if (x.dtype() == DType::kI32) {
    integers_to_float(x.data<int32_t>(), out.data<float>(), n);
  } else if (x.dtype() == DType::kI64) {
    integers_to_float(x.data<int64_t>(), out.data<float>(), n);
  } else {
    integers_to_float(x.data<uint8_t>(), out.data<float>(), n);
  }
}

}  // namespace headroom
