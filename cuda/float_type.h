// The storage dtype a kernel entry point takes for its floating tensors,
// one list for every op file of cuda/ and their host callers
// (src/backend/cuda/cuda_dtype.h's float_type_of): a dtype that gains
// kernels is added here once.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace headroom::cuda {

enum class FloatType : uint8_t { kF32, kBF16, kF16 };

#ifdef __CUDACC__
// Calls f with a null pointer of the C++ type stored as `type` (float,
// __nv_bfloat16, __half), so one templated launch serves every dtype.
template <typename F>
cudaError_t with_float_type(FloatType type, F&& f) {
  switch (type) {
    case FloatType::kF32:
      return f(static_cast<float*>(nullptr));
    case FloatType::kBF16:
      return f(static_cast<__nv_bfloat16*>(nullptr));
    case FloatType::kF16:
      return f(static_cast<__half*>(nullptr));
  }
  return cudaErrorInvalidValue;
}
#endif

}  // namespace headroom::cuda
