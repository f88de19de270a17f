// fill, add, cast on cuda: the kernels of cuda/fill.cu, add.cu and cast.cu on
// the backend's stream, for the dtypes those kernels have (fill: fp32 and
// bf16; add: fp32; cast: fp32 <-> bf16 and same-dtype copies). Any other
// dtype is refused with a UsageError naming the op and dtype before anything
// is launched: the cuda table's dtype coverage grows kernel by kernel, and a
// run must not get a silently wrong tensor meanwhile.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

[[noreturn]] void refuse_dtype(const char* op, const std::string& dtypes) {
  throw UsageError(std::string("cuda ") + op + ": no cuda kernel for " + dtypes +
                   " yet (run it on run.backend = \"cpu\", or plan it with `headroom plan` "
                   "(it plans run.backend = \"cuda\" for the GPU))");
}

}  // namespace

void CudaKernels::fill(Tensor& x, float value) {
  if (x.numel() == 0) return;
  switch (x.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::fill_f32(x.data<float>(), x.numel(), value, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::fill_bf16(static_cast<uint16_t*>(x.raw()), x.numel(), value, stream()));
      return;
    default:
      refuse_dtype("fill", std::string(name_of(x.dtype())));
  }
}

void CudaKernels::add(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.numel() == 0) return;
  if (a.dtype() != DType::kF32) refuse_dtype("add", std::string(name_of(a.dtype())));
  HR_CUDA_CHECK(
      cuda::add_f32(a.data<float>(), b.data<float>(), out.data<float>(), a.numel(), stream()));
}

void CudaKernels::cast(const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  if (x.dtype() == out.dtype()) {
    copy(x, out);
  } else if (x.dtype() == DType::kF32 && out.dtype() == DType::kBF16) {
    HR_CUDA_CHECK(cuda::cast_f32_to_bf16(x.data<float>(), static_cast<uint16_t*>(out.raw()),
                                         x.numel(), stream()));
  } else if (x.dtype() == DType::kBF16 && out.dtype() == DType::kF32) {
    HR_CUDA_CHECK(cuda::cast_bf16_to_f32(static_cast<const uint16_t*>(x.raw()), out.data<float>(),
                                         x.numel(), stream()));
  } else {
    refuse_dtype("cast",
                 std::string(name_of(x.dtype())) + " -> " + std::string(name_of(out.dtype())));
  }
}

}  // namespace headroom
