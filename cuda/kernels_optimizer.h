// Entry points of the optimizer and NF4 kernels (adamw.cu, adamw8bit.cu,
// nf4.cu). Every function launches on `stream` and returns the launch status;
// none synchronizes. Pointers are device pointers; bf16 and fp16 are raw
// uint16_t. The scalars are the cpu ops' own (cpu/adamw.cc, adamw8bit.cc),
// computed on the host by src/backend/cuda/adamw.cc and adamw8bit.cc.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace headroom::cuda {

// Where a 16-bit parameter's update is computed and stored
// (cpu/weight_update.h): on param itself, on an fp32 master, or on a master
// of param's own dtype (one rounding, written to both).
enum class MasterKind { kNone, kF32, kParamDtype };

// cpu/adamw.cc's Scalars, plus 1 - one_minus_beta1 for lerp's other side.
struct AdamWScalars {
  float decay;      // 1 - lr * wd
  float step_size;  // lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float one_minus_beta1, one_minus_weight, beta2, one_minus_beta2, eps, grad_scale;
  bool lerp_from_m;  // 1 - beta1 < 0.5
};

// cpu/adamw8bit.cc's Scalars8bit; zero_s, zero_u: the codes of 0.
struct AdamW8bitScalars {
  float step_size, c2_eps, decay, beta1, beta2, one_minus_beta1, one_minus_beta2, grad_scale;
  uint8_t zero_s, zero_u;
};

// 256 values of a dynamic map (backend/common/dynamic_map.h), passed to the
// kernels by value (kernel parameters: nothing to allocate or copy).
struct DynamicMap {
  float values[256];
};

// The 16 NF4 values, nf4_values() of backend/common/nf4.h.
struct Nf4Values {
  float values[16];
};

// One AdamW step on n elements (cpu/adamw.cc's step, its FMAs where the cpu's
// AVX2 / AVX-512 clones have them); m, v fp32 in place. The master pointer
// is null for kNone, float* for kF32, and param's dtype for kParamDtype.
cudaError_t adamw_update_f32(float* param, const float* grad, float* m, float* v, int64_t n,
                             const AdamWScalars& s, cudaStream_t stream);
cudaError_t adamw_update_bf16(uint16_t* param, void* master, MasterKind master_kind,
                              const uint16_t* grad, float* m, float* v, int64_t n,
                              const AdamWScalars& s, cudaStream_t stream);
cudaError_t adamw_update_f16(uint16_t* param, void* master, MasterKind master_kind,
                             const uint16_t* grad, float* m, float* v, int64_t n,
                             const AdamWScalars& s, cudaStream_t stream);

// One blockwise 8-bit AdamW step (cpu/adamw8bit.cc): m, v uint8 codes (n),
// m_absmax, v_absmax fp32 (ceil(n / 256)), all in place; one thread block
// per block of 256. Master as for adamw_update_*.
cudaError_t adamw8bit_update_f32(float* param, const float* grad, uint8_t* m, uint8_t* v,
                                 float* m_absmax, float* v_absmax, int64_t n,
                                 const AdamW8bitScalars& s, const DynamicMap& map_s,
                                 const DynamicMap& map_u, cudaStream_t stream);
cudaError_t adamw8bit_update_bf16(uint16_t* param, void* master, MasterKind master_kind,
                                  const uint16_t* grad, uint8_t* m, uint8_t* v, float* m_absmax,
                                  float* v_absmax, int64_t n, const AdamW8bitScalars& s,
                                  const DynamicMap& map_s, const DynamicMap& map_u,
                                  cudaStream_t stream);
cudaError_t adamw8bit_update_f16(uint16_t* param, void* master, MasterKind master_kind,
                                 const uint16_t* grad, uint8_t* m, uint8_t* v, float* m_absmax,
                                 float* v_absmax, int64_t n, const AdamW8bitScalars& s,
                                 const DynamicMap& map_s, const DynamicMap& map_u,
                                 cudaStream_t stream);

// NF4 codes (ceil(n / 2) bytes, first element in the high nibble) and fp32
// absmax (ceil(n / 64)) of n elements of w (cpu/nf4.cc's quantize_codes).
cudaError_t nf4_quantize_f32(const float* w, int64_t n, uint8_t* codes, float* absmax,
                             cudaStream_t stream);
cudaError_t nf4_quantize_bf16(const uint16_t* w, int64_t n, uint8_t* codes, float* absmax,
                              cudaStream_t stream);
cudaError_t nf4_quantize_f16(const uint16_t* w, int64_t n, uint8_t* codes, float* absmax,
                             cudaStream_t stream);
// Double quantization of `blocks` fp32 absmax: offset[0] = mean (summed in
// double in index order, as the cpu), absmax2 (ceil(blocks / 256)) and the
// uint8 codes qabsmax (blocks) of (absmax - offset) / absmax2 in `map`.
cudaError_t nf4_double_quantize(const float* absmax, int64_t blocks, uint8_t* qabsmax,
                                float* absmax2, float* offset, const DynamicMap& map,
                                cudaStream_t stream);
// absmax[b] = map[qabsmax[b]] * absmax2[b / 256] + offset[0], b < blocks.
cudaError_t nf4_rebuild_absmax(const uint8_t* qabsmax, const float* absmax2, const float* offset,
                               int64_t blocks, float* absmax, const DynamicMap& map,
                               cudaStream_t stream);
// out[i] = values[code(i)] * absmax[i / 64], rounded once to out's dtype.
cudaError_t nf4_dequantize_f32(const uint8_t* codes, const float* absmax, int64_t n, float* out,
                               const Nf4Values& values, cudaStream_t stream);
cudaError_t nf4_dequantize_bf16(const uint8_t* codes, const float* absmax, int64_t n, uint16_t* out,
                                const Nf4Values& values, cudaStream_t stream);
cudaError_t nf4_dequantize_f16(const uint8_t* codes, const float* absmax, int64_t n, uint16_t* out,
                               const Nf4Values& values, cudaStream_t stream);

}  // namespace headroom::cuda
