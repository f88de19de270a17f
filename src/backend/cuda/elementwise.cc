// fill, add, cast on cuda: the kernels of cuda/fill.cu, add.cu and cast.cu on
// the backend's stream, for every dtype the cpu ops have (cpu/fill.cc, add.cc,
// cast.cc) and with their numerics: fill of every dtype (floating values
// rounded to nearest even, integers truncated on the host as the cpu does);
// add of fp32, bf16 and fp16 (16-bit: in fp32, rounded once); cast between
// any two floating dtypes (bf16 <-> fp16 through fp32, one rounding), integers
// to fp32, and same-dtype copies. A dtype the front lets through that none of
// these covers is refused with a UsageError naming the op and dtype before
// anything is launched, so a run never gets a silently wrong tensor.
// Deterministic: elementwise, no reductions.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels.h"              // cuda/: the kernels themselves
#include "kernels_elementwise.h"  // cuda/: their other dtypes
#include "util/error.h"

namespace headroom {

void CudaKernels::fill(Tensor& x, float value) {
  const int64_t n = x.numel();
  if (n == 0) return;
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::fill_f32(x.data<float>(), n, value, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::fill_bf16(bits16(x), n, value, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::fill_f16(bits16(x), n, value, stream()));
      return;
    // check_fill made sure the value fits: truncated toward zero, as cpu/fill.cc.
    case DType::kI32:
      HR_CUDA_CHECK(cuda::fill_i32(x.data<int32_t>(), n, static_cast<int32_t>(value), stream()));
      return;
    case DType::kI64:
      HR_CUDA_CHECK(cuda::fill_i64(x.data<int64_t>(), n, static_cast<int64_t>(value), stream()));
      return;
    case DType::kU8:
      HR_CUDA_CHECK(cuda::fill_u8(x.data<uint8_t>(), n, static_cast<uint8_t>(value), stream()));
      return;
  }
  refuse_cuda_dtype("fill", x.dtype());
}

void CudaKernels::add(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;
  switch (a.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(
          cuda::add_f32(a.data<float>(), b.data<float>(), out.data<float>(), n, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::add_bf16(bits16(a), bits16(b), bits16(out), n, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::add_f16(bits16(a), bits16(b), bits16(out), n, stream()));
      return;
    default:
      refuse_cuda_dtype("add", a.dtype());
  }
}

void CudaKernels::cast(const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const DType from = x.dtype();
  const DType to = out.dtype();
  if (from == to) {
    copy(x, out);
  } else if (from == DType::kF32 && to == DType::kBF16) {
    HR_CUDA_CHECK(cuda::cast_f32_to_bf16(x.data<float>(), bits16(out), n, stream()));
  } else if (from == DType::kBF16 && to == DType::kF32) {
    HR_CUDA_CHECK(cuda::cast_bf16_to_f32(bits16(x), out.data<float>(), n, stream()));
  } else if (from == DType::kF32 && to == DType::kF16) {
    HR_CUDA_CHECK(cuda::cast_f32_to_f16(x.data<float>(), bits16(out), n, stream()));
  } else if (from == DType::kF16 && to == DType::kF32) {
    HR_CUDA_CHECK(cuda::cast_f16_to_f32(bits16(x), out.data<float>(), n, stream()));
  } else if (from == DType::kBF16 && to == DType::kF16) {
    HR_CUDA_CHECK(cuda::cast_bf16_to_f16(bits16(x), bits16(out), n, stream()));
  } else if (from == DType::kF16 && to == DType::kBF16) {
    HR_CUDA_CHECK(cuda::cast_f16_to_bf16(bits16(x), bits16(out), n, stream()));
  } else if (from == DType::kI32 && to == DType::kF32) {
    HR_CUDA_CHECK(cuda::cast_i32_to_f32(x.data<int32_t>(), out.data<float>(), n, stream()));
  } else if (from == DType::kI64 && to == DType::kF32) {
    HR_CUDA_CHECK(cuda::cast_i64_to_f32(x.data<int64_t>(), out.data<float>(), n, stream()));
  } else if (from == DType::kU8 && to == DType::kF32) {
    HR_CUDA_CHECK(cuda::cast_u8_to_f32(x.data<uint8_t>(), out.data<float>(), n, stream()));
  } else {
    refuse_cuda_dtype("cast", std::string(name_of(from)) + " -> " + std::string(name_of(to)));
  }
}

}  // namespace headroom
