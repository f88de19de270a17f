// cast between the dtypes of the cpu cast (cpu/cast.cc): fp32 <-> bf16 and
// fp32 <-> fp16 (widening exact, narrowing to nearest even, the same rounding
// as tensor/dtype.h's to_bf16 / to_f16, so cpu and cuda casts agree bit for
// bit on every non-NaN value), bf16 <-> fp16 through fp32 (exact) with one
// rounding, and int32 / int64 / uint8 -> fp32 (exact below 2^24, to nearest
// above, as the cpu's static_cast).
#include "kernels.h"
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

template <typename From, typename To>
__global__ void cast_kernel(const typename From::Storage* x, typename To::Storage* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = To::store(From::load(x[i]));
}

template <typename From, typename To>
cudaError_t launch_cast(const typename From::Storage* x, typename To::Storage* out, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  cast_kernel<From, To><<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

// An integer element read as fp32: the conversion rounds to nearest, as the
// cpu's static_cast<float> does under the default rounding mode.
template <typename T>
struct ElementInteger {
  using Storage = T;
  static __device__ __forceinline__ float load(T v) { return static_cast<float>(v); }
};

}  // namespace

cudaError_t cast_f32_to_bf16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementF32, ElementBF16>(x, out, n, stream);
}

cudaError_t cast_bf16_to_f32(const uint16_t* x, float* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementBF16, ElementF32>(x, out, n, stream);
}

cudaError_t cast_f32_to_f16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementF32, ElementF16>(x, out, n, stream);
}

cudaError_t cast_f16_to_f32(const uint16_t* x, float* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementF16, ElementF32>(x, out, n, stream);
}

cudaError_t cast_bf16_to_f16(const uint16_t* x, uint16_t* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementBF16, ElementF16>(x, out, n, stream);
}

cudaError_t cast_f16_to_bf16(const uint16_t* x, uint16_t* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementF16, ElementBF16>(x, out, n, stream);
}

cudaError_t cast_i32_to_f32(const int32_t* x, float* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementInteger<int32_t>, ElementF32>(x, out, n, stream);
}

cudaError_t cast_i64_to_f32(const int64_t* x, float* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementInteger<int64_t>, ElementF32>(x, out, n, stream);
}

cudaError_t cast_u8_to_f32(const uint8_t* x, float* out, int64_t n, cudaStream_t stream) {
  return launch_cast<ElementInteger<uint8_t>, ElementF32>(x, out, n, stream);
}

}  // namespace headroom::cuda
