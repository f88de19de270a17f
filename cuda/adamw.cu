// adamw_update: one AdamW step per element, cpu/adamw.cc's `step` operation
// for operation, in fp32 (bf16 / fp16 widened on load, rounded once to
// nearest even on store), so the two backends agree to the bit on finite
// values.
//
// The cpu loop runs as its AVX2 / AVX-512 clone on every machine this
// project trains on (cpu/cpu_clones.h), and there GCC contracts four of its
// products into FMAs (objdump of adamw.cc's x86-64-v3 and v4 clones, every
// dtype case alike):
//   lerp from m:  fma(w, g - m, m)           lerp from g:  fma(-(g - m), 1 - w, g)
//   v:            fma(beta2, v, (1 - beta2) * g * g)
//   p:            fma(p, decay, -(step_size * m / denominator))
// Those are written here as __fmaf_rn and every other operation as its
// _rn intrinsic, so nvcc contracts nothing else. (The baseline clone, for a
// cpu without FMA, rounds each product: it differs from both in last bits.)
// Elementwise: deterministic. Allocates: nothing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels_optimizer.h"
#include "storage.cuh"
#include "weight_update.cuh"

namespace headroom::cuda {

namespace {

// cpu/adamw.cc's step, with the cpu clones' contractions (top of file).
__device__ __forceinline__ float adamw_step(float p, float g, float& m, float& v,
                                            const AdamWScalars& s) {
  g = __fmul_rn(g, s.grad_scale);
  const float g_minus_m = __fsub_rn(g, m);
  const float from_m = __fmaf_rn(s.one_minus_beta1, g_minus_m, m);
  const float from_g = __fmaf_rn(-g_minus_m, s.one_minus_weight, g);
  m = s.lerp_from_m ? from_m : from_g;
  v = __fmaf_rn(s.beta2, v, __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
  const float denominator = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2_sqrt), s.eps);
  return __fmaf_rn(p, s.decay, -__fdiv_rn(__fmul_rn(s.step_size, m), denominator));
}

template <typename D, MasterKind K>
__global__ void adamw_kernel(WeightUpdate<D, K> w, const typename Storage<D>::T* grad, float* m,
                             float* v, int64_t n, const AdamWScalars s) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float p = adamw_step(w.load(i), Storage<D>::widen(grad[i]), mi, vi, s);
    m[i] = mi;
    v[i] = vi;
    w.store(i, p);
  }
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

template <typename D, MasterKind K>
cudaError_t launch(typename Storage<D>::T* param, void* master, const typename Storage<D>::T* grad,
                   float* m, float* v, int64_t n, const AdamWScalars& s, cudaStream_t stream) {
  adamw_kernel<D, K>
      <<<grid_for(n), 256, 0, stream>>>(WeightUpdate<D, K>{param, master}, grad, m, v, n, s);
  return cudaGetLastError();
}

template <typename D>
cudaError_t launch_16bit(uint16_t* param, void* master, MasterKind master_kind,
                         const uint16_t* grad, float* m, float* v, int64_t n, const AdamWScalars& s,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (master_kind) {
    case MasterKind::kF32:
      return launch<D, MasterKind::kF32>(param, master, grad, m, v, n, s, stream);
    case MasterKind::kParamDtype:
      return launch<D, MasterKind::kParamDtype>(param, master, grad, m, v, n, s, stream);
    case MasterKind::kNone:
      break;
  }
  return launch<D, MasterKind::kNone>(param, nullptr, grad, m, v, n, s, stream);
}

}  // namespace

cudaError_t adamw_update_f32(float* param, const float* grad, float* m, float* v, int64_t n,
                             const AdamWScalars& s, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch<float, MasterKind::kNone>(param, nullptr, grad, m, v, n, s, stream);
}

cudaError_t adamw_update_bf16(uint16_t* param, void* master, MasterKind master_kind,
                              const uint16_t* grad, float* m, float* v, int64_t n,
                              const AdamWScalars& s, cudaStream_t stream) {
  return launch_16bit<Bf16>(param, master, master_kind, grad, m, v, n, s, stream);
}

cudaError_t adamw_update_f16(uint16_t* param, void* master, MasterKind master_kind,
                             const uint16_t* grad, float* m, float* v, int64_t n,
                             const AdamWScalars& s, cudaStream_t stream) {
  return launch_16bit<F16>(param, master, master_kind, grad, m, v, n, s, stream);
}

}  // namespace headroom::cuda
