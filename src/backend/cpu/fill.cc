// fill: x[:] = value. Floating dtypes store the value (bf16: rounded to
// nearest even); integer dtypes store it truncated toward zero, and a value
// that does not fit is rejected by check_fill rather than wrapped.
// Allocates: nothing.
#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"

namespace headroom {

namespace {

template <typename T>
void fill_with(T* x, int64_t n, T value) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    x[i] = value;
}

}  // namespace

void CpuKernels::fill(Tensor& x, float value) {
  int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::kF32:
      fill_with(x.data<float>(), n, value);
      break;
    case DType::kBF16:
      fill_with(x.data<bf16>(), n, to_bf16(value));
      break;
    case DType::kF16:
      fill_with(x.data<f16>(), n, to_f16(value));
      break;
    case DType::kI32:
      fill_with(x.data<int32_t>(), n, static_cast<int32_t>(value));
      break;
    case DType::kI64:
      fill_with(x.data<int64_t>(), n, static_cast<int64_t>(value));
      break;
    case DType::kU8:
      fill_with(x.data<uint8_t>(), n, static_cast<uint8_t>(value));
      break;
  }
}

}  // namespace headroom
