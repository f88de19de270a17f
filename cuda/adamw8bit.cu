// adamw8bit_update: one step of bitsandbytes' blockwise 8-bit AdamW,
// cpu/adamw8bit.cc's update_blocks operation for operation: one thread block
// of 256 threads per block of kQuantBlock = 256 elements, one element per
// thread; dequantize m and v, update them and the weight, then each block's
// new absmax (a tree in shared memory) and the codes of m / absmax and
// v / absmax (quantize_to_map of backend/common/dynamic_map.h, the maps in
// shared memory).
//
// Numerics: fp32, each operation an _rn intrinsic so nvcc contracts nothing
// the cpu does not. The cpu loop runs as its AVX2 / AVX-512 clone on every
// machine this project trains on (cpu/cpu_clones.h), where GCC contracts
// three products into FMAs (objdump of adamw8bit.cc's x86-64-v3 clone):
//   v = fma(map_u[code] * v_absmax, beta2, (1 - beta2) * g * g)
//   m = fma(map_s[code] * m_absmax, beta1, (1 - beta1) * g)
//   p = fma(step_size, m / (sqrt(v) + c2 * eps), p), then p * decay
// so those are __fmaf_rn here. The absmax is the largest |value| with NaNs
// skipped (0 when all are), as the cpu's abs_max: the maximum of a set, the
// same whatever the order of the tree. Blocks are independent: deterministic.
// Allocates: nothing (the maps travel as kernel parameters).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/common/dynamic_map.h"
#include "kernels_optimizer.h"
#include "storage.cuh"
#include "weight_update.cuh"

namespace headroom::cuda {

namespace {

static_assert(kQuantBlock == 256, "one thread per element of a quantization block");
constexpr int kThreads = 256;

// |x| for the absmax, NaN as 0: the cpu's max skips NaNs, and every other
// magnitude is >= 0, so this changes no maximum but that of an all-NaN block.
__device__ __forceinline__ float magnitude(float x) {
  const float a = fabsf(x);
  return a > 0.0f ? a : 0.0f;
}

template <typename D, MasterKind K>
__global__ void __launch_bounds__(kThreads)
    adamw8bit_kernel(WeightUpdate<D, K> w, const typename Storage<D>::T* grad, uint8_t* mc,
                     uint8_t* vc, float* m_absmax, float* v_absmax, int64_t n, int64_t blocks,
                     const AdamW8bitScalars s, const DynamicMap map_s_in,
                     const DynamicMap map_u_in) {
  __shared__ float map_s[kThreads], map_u[kThreads];
  __shared__ float max_m[kThreads], max_v[kThreads];
  const int t = threadIdx.x;
  map_s[t] = map_s_in.values[t];
  map_u[t] = map_u_in.values[t];
  __syncthreads();

  // b is the same for every thread of the block, so every __syncthreads
  // below is reached by all of them.
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t i = b * kQuantBlock + t;
    const bool inside = i < n;
    const float m_scale = m_absmax[b], v_scale = v_absmax[b];
    float mi = 0.0f, vi = 0.0f;
    if (inside) {
      const float gi = __fmul_rn(Storage<D>::widen(grad[i]), s.grad_scale);
      vi = __fmaf_rn(__fmul_rn(map_u[vc[i]], v_scale), s.beta2,
                     __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
      mi = __fmaf_rn(__fmul_rn(map_s[mc[i]], m_scale), s.beta1, __fmul_rn(s.one_minus_beta1, gi));
      const float q = __fdiv_rn(mi, __fadd_rn(__fsqrt_rn(vi), s.c2_eps));
      const float p = __fmaf_rn(s.step_size, q, w.load(i));
      w.store(i, __fmul_rn(p, s.decay));  // decay 1 without weight decay: exact
    }
    max_m[t] = inside ? magnitude(mi) : 0.0f;
    max_v[t] = inside ? magnitude(vi) : 0.0f;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (t < width) {
        max_m[t] = fmaxf(max_m[t], max_m[t + width]);
        max_v[t] = fmaxf(max_v[t], max_v[t + width]);
      }
      __syncthreads();
    }
    const float m_max = max_m[0], v_max = max_v[0];
    if (t == 0) {
      // Every thread read this block's scales before the first barrier.
      m_absmax[b] = m_max;
      v_absmax[b] = v_max;
    }
    if (inside) {
      mc[i] = m_max > 0 ? quantize_to_map(map_s, true, __fdiv_rn(mi, m_max)) : s.zero_s;
      vc[i] = v_max > 0 ? quantize_to_map(map_u, false, __fdiv_rn(vi, v_max)) : s.zero_u;
    }
    // max_m[0] / max_v[0] are read above before the next block overwrites them.
    __syncthreads();
  }
}

template <typename D, MasterKind K>
cudaError_t launch(typename Storage<D>::T* param, void* master, const typename Storage<D>::T* grad,
                   uint8_t* m, uint8_t* v, float* m_absmax, float* v_absmax, int64_t n,
                   const AdamW8bitScalars& s, const DynamicMap& map_s, const DynamicMap& map_u,
                   cudaStream_t stream) {
  const int64_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
  const int grid = static_cast<int>(blocks < 65535 ? blocks : 65535);
  adamw8bit_kernel<D, K><<<grid, kThreads, 0, stream>>>(WeightUpdate<D, K>{param, master}, grad, m,
                                                        v, m_absmax, v_absmax, n, blocks, s, map_s,
                                                        map_u);
  return cudaGetLastError();
}

template <typename D>
cudaError_t launch_16bit(uint16_t* param, void* master, MasterKind master_kind,
                         const uint16_t* grad, uint8_t* m, uint8_t* v, float* m_absmax,
                         float* v_absmax, int64_t n, const AdamW8bitScalars& s,
                         const DynamicMap& map_s, const DynamicMap& map_u, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (master_kind) {
    case MasterKind::kF32:
      return launch<D, MasterKind::kF32>(param, master, grad, m, v, m_absmax, v_absmax, n, s, map_s,
                                         map_u, stream);
    case MasterKind::kParamDtype:
      return launch<D, MasterKind::kParamDtype>(param, master, grad, m, v, m_absmax, v_absmax, n, s,
                                                map_s, map_u, stream);
    case MasterKind::kNone:
      break;
  }
  return launch<D, MasterKind::kNone>(param, nullptr, grad, m, v, m_absmax, v_absmax, n, s, map_s,
                                      map_u, stream);
}

}  // namespace

cudaError_t adamw8bit_update_f32(float* param, const float* grad, uint8_t* m, uint8_t* v,
                                 float* m_absmax, float* v_absmax, int64_t n,
                                 const AdamW8bitScalars& s, const DynamicMap& map_s,
                                 const DynamicMap& map_u, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch<float, MasterKind::kNone>(param, nullptr, grad, m, v, m_absmax, v_absmax, n, s,
                                          map_s, map_u, stream);
}

cudaError_t adamw8bit_update_bf16(uint16_t* param, void* master, MasterKind master_kind,
                                  const uint16_t* grad, uint8_t* m, uint8_t* v, float* m_absmax,
                                  float* v_absmax, int64_t n, const AdamW8bitScalars& s,
                                  const DynamicMap& map_s, const DynamicMap& map_u,
                                  cudaStream_t stream) {
  return launch_16bit<Bf16>(param, master, master_kind, grad, m, v, m_absmax, v_absmax, n, s, map_s,
                            map_u, stream);
}

cudaError_t adamw8bit_update_f16(uint16_t* param, void* master, MasterKind master_kind,
                                 const uint16_t* grad, uint8_t* m, uint8_t* v, float* m_absmax,
                                 float* v_absmax, int64_t n, const AdamW8bitScalars& s,
                                 const DynamicMap& map_s, const DynamicMap& map_u,
                                 cudaStream_t stream) {
  return launch_16bit<F16>(param, master, master_kind, grad, m, v, m_absmax, v_absmax, n, s, map_s,
                           map_u, stream);
}

}  // namespace headroom::cuda
