// Entry points of the CUDA kernels. Every function launches on `stream` and
// returns the launch status; none synchronizes. Pointers are device pointers.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace headroom::cuda {

// x[i] = value, n fp32 elements.
cudaError_t fill_f32(float* x, int64_t n, float value, cudaStream_t stream);
// x[i] = value rounded to bf16 (raw uint16 storage), n elements.
cudaError_t fill_bf16(uint16_t* x, int64_t n, float value, cudaStream_t stream);
// out[i] = a[i] + b[i], fp32; out may alias a or b.
cudaError_t add_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// out[i] = bf16(x[i]) with round-to-nearest-even, and the reverse.
cudaError_t cast_f32_to_bf16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream);
cudaError_t cast_bf16_to_f32(const uint16_t* x, float* out, int64_t n, cudaStream_t stream);

// Free and total bytes of the current device (cudaMemGetInfo), for checking
// the allocator's reserved bytes against what the driver says.
cudaError_t device_memory(uint64_t* free_bytes, uint64_t* total_bytes);

}  // namespace headroom::cuda
