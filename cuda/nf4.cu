// nf4_quantize / nf4_dequantize: bitsandbytes' NF4 with blocks of 64
// (backend/common/nf4.h), cpu/nf4.cc step for step:
//   quantize: one warp per block of 64, two elements (one code byte) per
//     lane; absmax = the block's largest |w| with NaNs skipped (a butterfly
//     of fmaxf: a maximum, whatever the order), code = nf4_code(w * (1 /
//     absmax)), the same function as the cpu's.
//   double quantization: offset = mean of the fp32 absmax, summed in double
//     in index order by one thread (the cpu's sum, bit for bit: a tree would
//     round differently), then per block of 256 absmax one thread block:
//     absmax2 = max |absmax - offset| (a tree in shared memory), codes
//     quantize_to_map(signed map, plain nearest, (absmax - offset) *
//     (1 / absmax2)) of backend/common/dynamic_map.h.
//   dequantize: value(code) * absmax, rounded once; with double quantization
//     the absmax is first rebuilt as map[code] * absmax2 + offset.
// cpu/nf4.cc is not cloned (baseline x86-64, no FMA), so every operation
// here is an _rn intrinsic and nothing is contracted. Deterministic.
// Allocates: nothing (the maps travel as kernel parameters; the rebuilt
// absmax goes to the front's scratch).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/common/dynamic_map.h"
#include "backend/common/nf4.h"
#include "kernels_optimizer.h"
#include "storage.cuh"

namespace headroom::cuda {

namespace {

static_assert(kNf4Block == 64, "one warp of 32 lanes, two elements each, per block");
static_assert(kNf4AbsmaxBlock == 256, "one thread per absmax of a second-level block");
constexpr int kThreads = 256;

// |x| for an absmax, NaN as 0: the cpu's std::max skips NaNs and every other
// magnitude is >= 0, so this changes no maximum but that of an all-NaN set.
__device__ __forceinline__ float magnitude(float x) {
  const float a = fabsf(x);
  return a > 0.0f ? a : 0.0f;
}

int grid_for(int64_t threads) {
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

// Code byte j (elements 2j, 2j + 1) per thread. The stride is a multiple of
// 32, so a warp keeps covering one whole block of 64 (bytes 32b .. 32b + 31)
// and loops while its block exists: the shuffles always see all 32 lanes.
template <typename D>
__global__ void quantize_kernel(const typename Storage<D>::T* w, int64_t n, int64_t code_bytes,
                                uint8_t* codes, float* absmax) {
  const int lane = threadIdx.x % 32;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       j - lane < code_bytes; j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = 2 * j;
    // Past n: 0, as the kernel's load pads (and 0 changes no absmax).
    const float high = i < n ? Storage<D>::widen(w[i]) : 0.0f;
    const float low = i + 1 < n ? Storage<D>::widen(w[i + 1]) : 0.0f;
    float largest = fmaxf(magnitude(high), magnitude(low));
    for (int offset = 16; offset > 0; offset /= 2)
      largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
    // A block of zeros: 1 / 0 = inf, 0 * inf = NaN, code 0, as the cpu's.
    const float inverse = __fdiv_rn(1.0f, largest);
    if (j < code_bytes)
      codes[j] = static_cast<uint8_t>(nf4_code(__fmul_rn(high, inverse)) << 4 |
                                      nf4_code(__fmul_rn(low, inverse)));
    if (lane == 0) absmax[j / 32] = largest;
  }
}

// offset[0] = float(sum of absmax in double / blocks), the sum in index
// order by thread 0 while the block stages the next tile in shared memory.
constexpr int kTile = 2048;
__global__ void __launch_bounds__(kThreads)
    mean_kernel(const float* absmax, int64_t blocks, float* offset) {
  __shared__ float tile[2][kTile];
  const int64_t tiles = (blocks + kTile - 1) / kTile;
  const auto stage = [&](int64_t t) {
    for (int k = threadIdx.x; k < kTile; k += kThreads) {
      const int64_t b = t * kTile + k;
      if (b < blocks) tile[t % 2][k] = absmax[b];
    }
  };
  stage(0);
  __syncthreads();
  double sum = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    // Tile t + 1 goes to the buffer thread 0 finished reading before the
    // last barrier.
    if (t + 1 < tiles) stage(t + 1);
    if (threadIdx.x == 0) {
      const int64_t count = blocks - t * kTile < kTile ? blocks - t * kTile : kTile;
      const float* x = tile[t % 2];
      for (int64_t k = 0; k < count; ++k)
        sum = __dadd_rn(sum, static_cast<double>(x[k]));
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) offset[0] = __double2float_rn(__ddiv_rn(sum, static_cast<double>(blocks)));
}

// One thread block per 256 absmax (the last partial), one absmax each.
__global__ void __launch_bounds__(kThreads)
    double_quantize_kernel(const float* absmax, int64_t blocks, int64_t blocks2, uint8_t* qabsmax,
                           float* absmax2, const float* offset, const DynamicMap map_in) {
  __shared__ float map[kThreads];
  __shared__ float largest[kThreads];
  const int t = threadIdx.x;
  map[t] = map_in.values[t];
  __syncthreads();
  const float mean = offset[0];
  // Plain nearest value, no sign rule (is_signed = false): the blockwise
  // quantizer's, as the cpu's.
  const uint8_t zero = quantize_to_map(map, false, 0.0f);
  for (int64_t b2 = blockIdx.x; b2 < blocks2; b2 += gridDim.x) {
    const int64_t b = b2 * kNf4AbsmaxBlock + t;
    const bool inside = b < blocks;
    const float centered = inside ? __fsub_rn(absmax[b], mean) : 0.0f;
    largest[t] = inside ? magnitude(centered) : 0.0f;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (t < width) largest[t] = fmaxf(largest[t], largest[t + width]);
      __syncthreads();
    }
    const float block_max = largest[0];
    if (t == 0) absmax2[b2] = block_max;
    if (inside)
      qabsmax[b] = block_max > 0 ? quantize_to_map(map, false,
                                                   __fmul_rn(centered, __fdiv_rn(1.0f, block_max)))
                                 : zero;
    // largest[0] is read above before the next block overwrites it.
    __syncthreads();
  }
}

__global__ void rebuild_kernel(const uint8_t* qabsmax, const float* absmax2, const float* offset,
                               int64_t blocks, float* absmax, const DynamicMap map) {
  const float mean = offset[0];
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x)
    absmax[b] = __fadd_rn(__fmul_rn(map.values[qabsmax[b]], absmax2[b / kNf4AbsmaxBlock]), mean);
}

template <typename D>
__global__ void dequantize_kernel(const uint8_t* codes, const float* absmax, int64_t n,
                                  typename Storage<D>::T* out, const Nf4Values values) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint8_t byte = codes[i / 2];
    const int code = i % 2 == 0 ? byte >> 4 : byte & 0x0f;
    out[i] = Storage<D>::round(__fmul_rn(values.values[code], absmax[i / kNf4Block]));
  }
}

template <typename D>
cudaError_t quantize(const typename Storage<D>::T* w, int64_t n, uint8_t* codes, float* absmax,
                     cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int64_t code_bytes = (n + 1) / 2;
  // Whole warps: the last block's lanes past code_bytes take part in its
  // shuffles.
  const int64_t threads = (code_bytes + 31) / 32 * 32;
  quantize_kernel<D><<<grid_for(threads), kThreads, 0, stream>>>(w, n, code_bytes, codes, absmax);
  return cudaGetLastError();
}

template <typename D>
cudaError_t dequantize(const uint8_t* codes, const float* absmax, int64_t n,
                       typename Storage<D>::T* out, const Nf4Values& values, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  dequantize_kernel<D><<<grid_for(n), kThreads, 0, stream>>>(codes, absmax, n, out, values);
  return cudaGetLastError();
}

}  // namespace

cudaError_t nf4_quantize_f32(const float* w, int64_t n, uint8_t* codes, float* absmax,
                             cudaStream_t stream) {
  return quantize<float>(w, n, codes, absmax, stream);
}

cudaError_t nf4_quantize_bf16(const uint16_t* w, int64_t n, uint8_t* codes, float* absmax,
                              cudaStream_t stream) {
  return quantize<Bf16>(w, n, codes, absmax, stream);
}

cudaError_t nf4_quantize_f16(const uint16_t* w, int64_t n, uint8_t* codes, float* absmax,
                             cudaStream_t stream) {
  return quantize<F16>(w, n, codes, absmax, stream);
}

cudaError_t nf4_double_quantize(const float* absmax, int64_t blocks, uint8_t* qabsmax,
                                float* absmax2, float* offset, const DynamicMap& map,
                                cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  mean_kernel<<<1, kThreads, 0, stream>>>(absmax, blocks, offset);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  const int64_t blocks2 = (blocks + kNf4AbsmaxBlock - 1) / kNf4AbsmaxBlock;
  const int grid = static_cast<int>(blocks2 < 65535 ? blocks2 : 65535);
  double_quantize_kernel<<<grid, kThreads, 0, stream>>>(absmax, blocks, blocks2, qabsmax, absmax2,
                                                        offset, map);
  return cudaGetLastError();
}

cudaError_t nf4_rebuild_absmax(const uint8_t* qabsmax, const float* absmax2, const float* offset,
                               int64_t blocks, float* absmax, const DynamicMap& map,
                               cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  rebuild_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(qabsmax, absmax2, offset, blocks,
                                                            absmax, map);
  return cudaGetLastError();
}

cudaError_t nf4_dequantize_f32(const uint8_t* codes, const float* absmax, int64_t n, float* out,
                               const Nf4Values& values, cudaStream_t stream) {
  return dequantize<float>(codes, absmax, n, out, values, stream);
}

cudaError_t nf4_dequantize_bf16(const uint8_t* codes, const float* absmax, int64_t n, uint16_t* out,
                                const Nf4Values& values, cudaStream_t stream) {
  return dequantize<Bf16>(codes, absmax, n, out, values, stream);
}

cudaError_t nf4_dequantize_f16(const uint8_t* codes, const float* absmax, int64_t n, uint16_t* out,
                               const Nf4Values& values, cudaStream_t stream) {
  return dequantize<F16>(codes, absmax, n, out, values, stream);
}

}  // namespace headroom::cuda
