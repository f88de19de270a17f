// Entry points of block-sparse flash attention on cuda
// (cuda/flash_attention_forward.cu, cuda/flash_attention_backward.cu): the
// cuda halves of cpu/attention.cc, with its equations. Every function
// launches on `stream` and returns the launch status; none synchronizes, none
// allocates. Pointers are device pointers except `cu` (host). bf16 and fp16
// are raw uint16_t storage, widened to fp32 on load and rounded to nearest
// even once on store; all math is fp32. No atomics: every output element is
// owned by one thread and summed in a fixed order, so a call gives the same
// bits every time.
//
// Shapes (kernels.h / attention_checks.h): q, out, d_out, dq (T, H*D); k, v,
// dk, dv (T, KV*D); lse, delta (H, T) fp32. Query head h reads kv head
// h / (H / KV). cu: documents + 1 offsets (cu[0] = 0, cu[documents] = T,
// never decreasing). The mask is attention_mask.h's: query i sees the keys
// [lo(i), hi(i)) of its document. head_dim must be one of
// flash_attention_head_dim_supported's; the caller refuses the rest.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "backend/common/attention_mask.h"
#include "float_type.h"

namespace headroom::cuda {

// The storage dtype of q, k, v and of the results: FloatType (float_type.h).

// The sizes of one call (T tokens, H heads, KV kv heads, D head_dim) and its
// softmax scale.
struct FlashDims {
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0;
  AttentionMask mask;
};

// Whether the kernels are compiled for this head_dim (64 and 128).
bool flash_attention_head_dim_supported(int64_t head_dim);

// out = softmax(scale q k^T over the visible keys) v per head; lse[h, i] =
// logsumexp over query i's visible keys of scale q_i . k_j. On tensor cores
// (flash_attention_forward_mma) where they take the call, else SIMT.
cudaError_t flash_attention_forward(const void* q, const void* k, const void* v, const int32_t* cu,
                                    int64_t documents, const FlashDims& dims, FloatType type,
                                    void* out, float* lse, cudaStream_t stream);

// The same on CUDA cores in fp32 FMAs, any FloatType
// (flash_attention_forward.cu).
cudaError_t flash_attention_forward_simt(const void* q, const void* k, const void* v,
                                         const int32_t* cu, int64_t documents,
                                         const FlashDims& dims, FloatType type, void* out,
                                         float* lse, cudaStream_t stream);

// Whether flash_attention_forward_mma takes a call: bf16 or fp16, a head_dim
// of flash_attention_head_dim_supported, and q, k, v, out 16-byte aligned
// (its copies are 16-byte pieces).
bool flash_attention_forward_on_tensor_cores(const void* q, const void* k, const void* v,
                                             const void* out, const FlashDims& dims,
                                             FloatType type);

// The same on tensor cores, mma.sync m16n8k16 with fp32 accumulation
// (flash_attention_forward_mma.cu; P is rounded to the operand dtype before
// P V, as FlashAttention-2 does); cudaErrorInvalidValue for a call it does
// not take.
cudaError_t flash_attention_forward_mma(const void* q, const void* k, const void* v,
                                        const int32_t* cu, int64_t documents, const FlashDims& dims,
                                        FloatType type, void* out, float* lse, cudaStream_t stream);

// delta[h, i] = rowsum(d_out * out) of query i, head h (fp32).
cudaError_t flash_attention_delta(const void* d_out, const void* out, const FlashDims& dims,
                                  FloatType type, float* delta, cudaStream_t stream);

// dq, dk, dv written from d_out, q, k, v, lse (forward's) and delta
// (flash_attention_delta's, queued before), on tensor cores where they take
// the call, else SIMT: FlashAttention-2's equations,
// P = exp(scale S - lse), dS = P * (dO V^T - delta), dq = scale dS K,
// dk = scale dS^T Q (summed over the kv head's query heads), dv = P^T dO.
cudaError_t flash_attention_backward(const void* d_out, const void* q, const void* k, const void* v,
                                     const float* lse, const float* delta, const int32_t* cu,
                                     int64_t documents, const FlashDims& dims, FloatType type,
                                     void* dq, void* dk, void* dv, cudaStream_t stream);

// The same on CUDA cores in fp32 FMAs, any FloatType
// (flash_attention_backward.cu); flash_attention_backward calls it where the
// tensor cores do not take the call.
cudaError_t flash_attention_backward_simt(const void* d_out, const void* q, const void* k,
                                          const void* v, const float* lse, const float* delta,
                                          const int32_t* cu, int64_t documents,
                                          const FlashDims& dims, FloatType type, void* dq, void* dk,
                                          void* dv, cudaStream_t stream);

// Whether flash_attention_backward_mma takes a call: bf16 or fp16, a
// supported head_dim, every pointer 16-byte aligned.
bool flash_attention_backward_on_tensor_cores(const void* d_out, const void* q, const void* k,
                                              const void* v, const void* dq, const void* dk,
                                              const void* dv, const FlashDims& dims,
                                              FloatType type);

// The same on tensor cores (flash_attention_backward_mma.cu; P and dS
// rounded to the operand dtype before the products they feed);
// cudaErrorInvalidValue for a call it does not take.
cudaError_t flash_attention_backward_mma(const void* d_out, const void* q, const void* k,
                                         const void* v, const float* lse, const float* delta,
                                         const int32_t* cu, int64_t documents,
                                         const FlashDims& dims, FloatType type, void* dq, void* dk,
                                         void* dv, cudaStream_t stream);

}  // namespace headroom::cuda

#ifdef __CUDACC__
// ---- device helpers shared by the two .cu files (nvcc only) ----
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "storage.cuh"

namespace headroom::cuda::flash {

// Kernel tiles, fixed whatever params.block_size is (see the .cu headers):
// 256 threads as 16 row groups x 16 column groups.
constexpr int kThreads = 256;
constexpr int kGroups = 16;

// The offsets of up to kDocuments documents, passed by value (the op gets
// no device copy of cu_seqlens and may not allocate one). Longer lists take
// one launch per chunk: a query sees only keys of its own document (except
// causal, which ignores documents and is launched as one chunk {0, T}).
constexpr int kDocuments = 511;
struct Documents {
  int32_t offsets[kDocuments + 1];  // document d of the chunk: [offsets[d], offsets[d + 1])
  int32_t count = 0;                // documents in the chunk
};

// The visible keys of token i, offsets[0] <= i < offsets[count], in its
// document (attention_mask.h's document_of).
__device__ __forceinline__ KeyInterval row_keys(const AttentionMask& mask, const Documents& docs,
                                                int64_t i) {
  const int d = document_of(docs.offsets, docs.count, i);
  return visible_keys_in_document(mask, docs.offsets[d], docs.offsets[d + 1], i);
}

// The queries [begin', end') of the chunk [begin, end) that see any key of
// [k0, k1) (begin <= k0 < k1 <= end): hi(i) > k0 holds on a suffix (from at
// most k0 on) and lo(i) < k1 on a prefix (to at least k1 - 1), so two binary
// searches find them. What a dk/dv block walks.
__device__ __forceinline__ KeyInterval queries_seeing_keys(const AttentionMask& mask,
                                                           const Documents& docs, int64_t begin,
                                                           int64_t end, int64_t k0, int64_t k1) {
  int64_t a = begin, b = k0;
  while (a < b) {
    const int64_t mid = a + (b - a) / 2;
    if (row_keys(mask, docs, mid).hi > k0)
      b = mid;
    else
      a = mid + 1;
  }
  const int64_t first = a;
  a = k1;
  b = end;
  while (a < b) {
    const int64_t mid = a + (b - a) / 2;
    if (row_keys(mask, docs, mid).lo >= k1)
      b = mid;
    else
      a = mid + 1;
  }
  return {first, a};
}

// The visible keys [lo[i], hi[i]) of this thread's query rows q0 + ty + 16 i
// (i < kRows) of a tile of nq rows; padding rows (ty + 16 i >= nq) see
// nothing, [0, 0).
template <int kRows>
__device__ __forceinline__ void tile_row_keys(const AttentionMask& mask, const Documents& docs,
                                              int64_t q0, int64_t nq, int ty, int64_t (&lo)[kRows],
                                              int64_t (&hi)[kRows]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int r = ty + kGroups * i;
    lo[i] = 0;
    hi[i] = 0;
    if (r < nq) {
      const KeyInterval keys = row_keys(mask, docs, q0 + r);
      lo[i] = keys.lo;
      hi[i] = keys.hi;
    }
  }
}

// acc[i][c] += sum over kc < kKeys, in kc order, of w[ty + 16 i][kc] *
// x[kc][tx + 16 c]: this thread's part of (W X) for forward's P V and dq's
// dS K. w has rows `ldw` floats apart, x is [kKeys][kD + 1]; both in shared
// memory.
template <int kRows, int kKeys, int kD>
__device__ __forceinline__ void accumulate_product(float (&acc)[kRows][kD / kGroups],
                                                   const float* w, int ldw, const float* x, int tx,
                                                   int ty) {
  constexpr int kLD = kD + 1, kDC = kD / kGroups;
#pragma unroll 4
  for (int kc = 0; kc < kKeys; ++kc) {
    float b[kDC];
#pragma unroll
    for (int c = 0; c < kDC; ++c)
      b[c] = x[kc * kLD + tx + kGroups * c];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const float p = w[(ty + kGroups * i) * ldw + kc];
#pragma unroll
      for (int c = 0; c < kDC; ++c)
        acc[i][c] = fmaf(p, b[c], acc[i][c]);
    }
  }
}

using ::headroom::cuda::store;  // storage.cuh
using ::headroom::cuda::widen;

// dst[r][c] (rows `ld` floats apart) = src row r0 + r, column c, widened,
// for r < valid; 0 for valid <= r < kRows (padding rows: finite, so a 0
// probability times them stays 0). src points at the head's first column.
template <int kRows, int kD, typename T>
__device__ __forceinline__ void load_tile(float* dst, int ld, const T* src, int64_t stride,
                                          int64_t r0, int64_t valid) {
  for (int e = threadIdx.x; e < kRows * kD; e += kThreads) {
    const int r = e / kD, c = e % kD;
    dst[r * ld + c] = r < valid ? widen(src[(r0 + r) * stride + c]) : 0.0f;
  }
}

// Calls f(docs, begin, end) for each chunk of at most kDocuments documents
// holding tokens (causal: one chunk, {0, T}); stops at the first error.
template <typename F>
cudaError_t for_each_chunk(const int32_t* cu, int64_t documents, const AttentionMask& mask,
                           int64_t tokens, F&& f) {
  if (tokens == 0) return cudaSuccess;
  Documents docs;
  if (mask.kind == AttentionMaskKind::kCausal) {
    docs.count = 1;
    docs.offsets[0] = 0;
    docs.offsets[1] = static_cast<int32_t>(tokens);
    return f(docs, int64_t{0}, tokens);
  }
  for (int64_t d0 = 0; d0 < documents; d0 += kDocuments) {
    const int64_t d1 = documents - d0 < kDocuments ? documents : d0 + kDocuments;
    if (cu[d1] == cu[d0]) continue;  // only empty documents
    docs.count = static_cast<int32_t>(d1 - d0);
    for (int64_t d = d0; d <= d1; ++d)
      docs.offsets[d - d0] = cu[d];
    const cudaError_t err = f(docs, int64_t{cu[d0]}, int64_t{cu[d1]});
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace headroom::cuda::flash
#endif
