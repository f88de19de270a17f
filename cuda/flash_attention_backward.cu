// Block-sparse flash attention backward on cuda (cpu/attention.cc's
// backward, FlashAttention-2's equations with P recomputed from lse):
//   delta_i = rowsum(dO_i * O_i)            (delta_kernel, first)
//   P = exp(scale S - lse), dP = dO V^T, dS = P * (dP - delta)
//   dq = scale dS K                         (dq_kernel)
//   dv = P^T dO, dk = scale dS^T Q          (dkv_kernel)
// In two passes like the cpu, each recomputing the P it needs, so no output
// is shared between blocks: no atomics, no partial buffers, deterministic.
//
// SIMT (CUDA cores, fp32 FMA): fp32, and bf16 / fp16 where
// flash_attention_backward_mma.cu's tensor cores do not take the call. 256 threads as 16 row
// groups ty x 16 column groups tx (a row's column groups are one half-warp).
// Tiles fixed at 32 x 32 whatever params.block_size is (it only sets the
// cpu's tile plan; the pairs walked here are the same visible set).
//   delta_kernel: one warp per (head, token) row, a shuffle tree over D.
//   dq_kernel:  grid x = query tiles of 32 tokens of a document chunk,
//     y = heads. Keys walked: [lo(q0), hi(q1 - 1)), the union of the rows'
//     intervals (contiguous: lo and hi never decrease), 32 at a time.
//     Shared (dynamic, fp32): Q, dO [32][D+1], K, V [32][D+1], dS [32][33].
//   dkv_kernel: grid x = key tiles of 32 tokens, y = kv heads. The queries
//     seeing keys [k0, k1) are [a, b): a = the first i with hi(i) > k0, b =
//     the first i >= k1 with lo(i) >= k1 (binary searches on device, by
//     monotonicity), walked 32 at a time for each query head of the group in
//     order; dk and dv accumulate in registers over all of them. Shared: K,
//     V, Q, dO [32][D+1], P and dS [32][33].
//   Shared memory: 35.6 KiB (dq) / 37.7 KiB (dkv) at D = 64; 70.3 / 74.5 KiB
//   at D = 128.
// Mask: a (query tile, key tile) pair is full (no per-element mask) when
// both tiles hold 32 tokens, lo(last query) <= first key and hi(first query)
// >= last key + 1; otherwise each query row keeps its [lo(i), hi(i)) from
// attention_mask.h's visible_keys_in_document, and padding rows see nothing.
// Numerics vs cpu: the same formulas in fp32 (p = exp(scale * s - lse) where
// visible, else 0; dS = p * (dp - delta); dq and dk times scale at the end;
// dk / dv summed over the group's heads in head order, then query tiles in
// order, as the cpu does). Differences: dot products and tile sums in
// another order, and expf instead of the cpu's exp_approx: rounding-level.
// Allocates: nothing (delta is the op's scratch, attention.delta).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels_flash_attention.h"

namespace headroom::cuda {

namespace {

using flash::Documents;
using flash::kGroups;
using flash::kThreads;

constexpr int kB = 32;            // both tile edges
constexpr int kR = kB / kGroups;  // rows / columns per thread of a tile
constexpr int kLP = kB + 1;

template <int kD>
constexpr size_t backward_shared_bytes(int tiles, int small_tiles) {
  return sizeof(float) *
         (static_cast<size_t>(tiles) * kB * (kD + 1) + static_cast<size_t>(small_tiles) * kB * kLP);
}

// ---- delta

template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
    delta_kernel(const T* d_out, const T* out, FlashDims dims, float* delta) {
  const int64_t rows = dims.heads * dims.tokens, stride = dims.heads * dims.head_dim;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kThreads / 32) + threadIdx.x / 32;
       row < rows; row += warps) {
    const int64_t h = row / dims.tokens, t = row % dims.tokens;
    const T* o = out + t * stride + h * dims.head_dim;
    const T* d_o = d_out + t * stride + h * dims.head_dim;
    float sum = 0.0f;
    for (int64_t c = lane; c < dims.head_dim; c += 32)
      sum = fmaf(flash::widen(o[c]), flash::widen(d_o[c]), sum);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) delta[row] = sum;
  }
}

// ---- shared pieces of the two gradient kernels

// s = A B^T and t = C E^T for this thread's kR x kR elements: rows ty + 16 i
// of A and C, rows tx + 16 j of B and E, all [32][kD + 1] in shared memory.
template <int kD>
__device__ __forceinline__ void two_products(const float* a, const float* b, const float* c,
                                             const float* e, int tx, int ty, float (&s)[kR][kR],
                                             float (&t)[kR][kR]) {
  constexpr int kLD = kD + 1;
#pragma unroll
  for (int i = 0; i < kR; ++i)
#pragma unroll
    for (int j = 0; j < kR; ++j) {
      s[i][j] = 0.0f;
      t[i][j] = 0.0f;
    }
#pragma unroll 8
  for (int d = 0; d < kD; ++d) {
    float ra[kR], rb[kR], rc[kR], re[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      ra[i] = a[(ty + kGroups * i) * kLD + d];
      rc[i] = c[(ty + kGroups * i) * kLD + d];
      rb[i] = b[(tx + kGroups * i) * kLD + d];
      re[i] = e[(tx + kGroups * i) * kLD + d];
    }
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        s[i][j] = fmaf(ra[i], rb[j], s[i][j]);
        t[i][j] = fmaf(rc[i], re[j], t[i][j]);
      }
  }
}

// lse and delta (both (H, T)) of this thread's query rows q0 + ty + 16 i of
// a tile of nq rows of head h, from `at` = h T + q0; 0 for padding rows.
__device__ __forceinline__ void row_stats(const float* lse, const float* delta, int64_t at,
                                          int64_t nq, int ty, float (&row_lse)[kR],
                                          float (&row_delta)[kR]) {
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int r = ty + kGroups * i;
    row_lse[i] = r < nq ? lse[at + r] : 0.0f;
    row_delta[i] = r < nq ? delta[at + r] : 0.0f;
  }
}

// ---- dq: one block per (query tile, head)

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads, 2)
    dq_kernel(const T* d_out, const T* q, const T* k, const T* v, const float* lse,
              const float* delta, T* dq, FlashDims dims, Documents docs, int64_t begin,
              int64_t end) {
  constexpr int kLD = kD + 1, kDC = kD / kGroups;
  extern __shared__ float shared[];
  float* qs = shared;          // [kB][kLD]
  float* dos = qs + kB * kLD;  // [kB][kLD]
  float* ks = dos + kB * kLD;  // [kB][kLD]
  float* vs = ks + kB * kLD;   // [kB][kLD]
  float* dss = vs + kB * kLD;  // [kB][kLP]

  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  const int64_t h = blockIdx.y, g = h / (dims.heads / dims.kv_heads);
  const int64_t q_stride = dims.heads * kD, kv_stride = dims.kv_heads * kD;
  const int64_t q0 = begin + static_cast<int64_t>(blockIdx.x) * kB;
  const int64_t nq = end - q0 < kB ? end - q0 : kB;

  const KeyInterval first = flash::row_keys(dims.mask, docs, q0);
  const KeyInterval last = flash::row_keys(dims.mask, docs, q0 + nq - 1);
  int64_t row_lo[kR], row_hi[kR];
  float row_lse[kR], row_delta[kR];
  flash::tile_row_keys(dims.mask, docs, q0, nq, ty, row_lo, row_hi);
  row_stats(lse, delta, h * dims.tokens + q0, nq, ty, row_lse, row_delta);

  flash::load_tile<kB, kD>(qs, kLD, q + h * kD, q_stride, q0, nq);
  flash::load_tile<kB, kD>(dos, kLD, d_out + h * kD, q_stride, q0, nq);

  float acc[kR][kDC];
#pragma unroll
  for (int i = 0; i < kR; ++i)
#pragma unroll
    for (int c = 0; c < kDC; ++c)
      acc[i][c] = 0.0f;

  for (int64_t k0 = first.lo; k0 < last.hi; k0 += kB) {
    const int64_t nk = last.hi - k0 < kB ? last.hi - k0 : kB;
    __syncthreads();  // the previous tile's readers are done (and qs, dos written)
    flash::load_tile<kB, kD>(ks, kLD, k + g * kD, kv_stride, k0, nk);
    flash::load_tile<kB, kD>(vs, kLD, v + g * kD, kv_stride, k0, nk);
    __syncthreads();

    float s[kR][kR], dp[kR][kR];
    two_products<kD>(qs, ks, dos, vs, tx, ty, s, dp);
    const bool full = nq == kB && nk == kB && last.lo <= k0 && first.hi >= k0 + kB;
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        const int64_t key = k0 + tx + kGroups * j;
        const bool visible = full || (key >= row_lo[i] && key < row_hi[i]);
        const float p = visible ? expf(s[i][j] * dims.scale - row_lse[i]) : 0.0f;
        dss[(ty + kGroups * i) * kLP + tx + kGroups * j] = p * (dp[i][j] - row_delta[i]);
      }
    __syncthreads();  // dss complete

    // acc += dS K (padding keys have dS = 0, K = 0).
    flash::accumulate_product<kR, kB, kD>(acc, dss, kLP, ks, tx, ty);
  }

#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int r = ty + kGroups * i;
    if (r >= nq) continue;
    T* row = dq + (q0 + r) * q_stride + h * kD;
#pragma unroll
    for (int c = 0; c < kDC; ++c)
      flash::store(row + tx + kGroups * c, acc[i][c] * dims.scale);
  }
}

// ---- dk, dv: one block per (key tile, kv head)

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads, 2)
    dkv_kernel(const T* d_out, const T* q, const T* k, const T* v, const float* lse,
               const float* delta, T* dk, T* dv, FlashDims dims, Documents docs, int64_t begin,
               int64_t end) {
  constexpr int kLD = kD + 1, kDC = kD / kGroups;
  extern __shared__ float shared[];
  float* ks = shared;          // [kB][kLD]
  float* vs = ks + kB * kLD;   // [kB][kLD]
  float* qs = vs + kB * kLD;   // [kB][kLD]
  float* dos = qs + kB * kLD;  // [kB][kLD]
  float* ps = dos + kB * kLD;  // [kB][kLP], queries x keys
  float* dss = ps + kB * kLP;  // [kB][kLP], queries x keys

  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  const int64_t g = blockIdx.y, group = dims.heads / dims.kv_heads;
  const int64_t q_stride = dims.heads * kD, kv_stride = dims.kv_heads * kD;
  const int64_t k0 = begin + static_cast<int64_t>(blockIdx.x) * kB;
  const int64_t nk = end - k0 < kB ? end - k0 : kB, k1 = k0 + nk;

  // The queries seeing any key of [k0, k1).
  const KeyInterval queries = flash::queries_seeing_keys(dims.mask, docs, begin, end, k0, k1);
  const int64_t query_begin = queries.lo, query_end = queries.hi;

  flash::load_tile<kB, kD>(ks, kLD, k + g * kD, kv_stride, k0, nk);
  flash::load_tile<kB, kD>(vs, kLD, v + g * kD, kv_stride, k0, nk);

  float dk_acc[kR][kDC], dv_acc[kR][kDC];  // keys ty + 16 i, columns tx + 16 c
#pragma unroll
  for (int i = 0; i < kR; ++i)
#pragma unroll
    for (int c = 0; c < kDC; ++c) {
      dk_acc[i][c] = 0.0f;
      dv_acc[i][c] = 0.0f;
    }

  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t q0 = query_begin; q0 < query_end; q0 += kB) {
      const int64_t nq = query_end - q0 < kB ? query_end - q0 : kB;
      const KeyInterval first = flash::row_keys(dims.mask, docs, q0);
      const KeyInterval last = flash::row_keys(dims.mask, docs, q0 + nq - 1);
      const bool full = nq == kB && nk == kB && last.lo <= k0 && first.hi >= k1;
      int64_t row_lo[kR] = {}, row_hi[kR] = {};  // read only when not full
      float row_lse[kR], row_delta[kR];
      if (!full) flash::tile_row_keys(dims.mask, docs, q0, nq, ty, row_lo, row_hi);
      row_stats(lse, delta, h * dims.tokens + q0, nq, ty, row_lse, row_delta);
      __syncthreads();  // the previous tile's readers are done (and ks, vs written)
      flash::load_tile<kB, kD>(qs, kLD, q + h * kD, q_stride, q0, nq);
      flash::load_tile<kB, kD>(dos, kLD, d_out + h * kD, q_stride, q0, nq);
      __syncthreads();

      float s[kR][kR], dp[kR][kR];  // queries ty + 16 i, keys tx + 16 j
      two_products<kD>(qs, ks, dos, vs, tx, ty, s, dp);
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kR; ++j) {
          const int64_t key = k0 + tx + kGroups * j;
          const bool visible = full || (key >= row_lo[i] && key < row_hi[i]);
          const float p = visible ? expf(s[i][j] * dims.scale - row_lse[i]) : 0.0f;
          const int at = (ty + kGroups * i) * kLP + tx + kGroups * j;
          ps[at] = p;
          dss[at] = p * (dp[i][j] - row_delta[i]);
        }
      __syncthreads();  // ps, dss complete

      // dv += P^T dO, dk += dS^T Q (padding queries have P = dS = 0).
#pragma unroll 4
      for (int r = 0; r < kB; ++r) {
        float o[kDC], x[kDC];
#pragma unroll
        for (int c = 0; c < kDC; ++c) {
          o[c] = dos[r * kLD + tx + kGroups * c];
          x[c] = qs[r * kLD + tx + kGroups * c];
        }
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          const float p = ps[r * kLP + ty + kGroups * i];
          const float ds = dss[r * kLP + ty + kGroups * i];
#pragma unroll
          for (int c = 0; c < kDC; ++c) {
            dv_acc[i][c] = fmaf(p, o[c], dv_acc[i][c]);
            dk_acc[i][c] = fmaf(ds, x[c], dk_acc[i][c]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int key = ty + kGroups * i;
    if (key >= nk) continue;
    const int64_t at = (k0 + key) * kv_stride + g * kD;
#pragma unroll
    for (int c = 0; c < kDC; ++c) {
      flash::store(dk + at + tx + kGroups * c, dk_acc[i][c] * dims.scale);
      flash::store(dv + at + tx + kGroups * c, dv_acc[i][c]);
    }
  }
}

template <typename T, int kD>
cudaError_t launch_backward(const void* d_out, const void* q, const void* k, const void* v,
                            const float* lse, const float* delta, const int32_t* cu,
                            int64_t documents, const FlashDims& dims, void* dq, void* dk, void* dv,
                            cudaStream_t stream) {
  constexpr size_t dq_bytes = backward_shared_bytes<kD>(4, 1);
  constexpr size_t dkv_bytes = backward_shared_bytes<kD>(4, 2);
  cudaError_t err = cudaFuncSetAttribute(
      dq_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dq_bytes));
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(dkv_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(dkv_bytes));
  if (err != cudaSuccess) return err;
  const T* d_o = static_cast<const T*>(d_out);
  const T* qp = static_cast<const T*>(q);
  const T* kp = static_cast<const T*>(k);
  const T* vp = static_cast<const T*>(v);
  return flash::for_each_chunk(
      cu, documents, dims.mask, dims.tokens,
      [&](const Documents& docs, int64_t begin, int64_t end) -> cudaError_t {
        const auto tiles = static_cast<unsigned>((end - begin + kB - 1) / kB);
        dq_kernel<T, kD>
            <<<dim3(tiles, static_cast<unsigned>(dims.heads)), kThreads, dq_bytes, stream>>>(
                d_o, qp, kp, vp, lse, delta, static_cast<T*>(dq), dims, docs, begin, end);
        cudaError_t launched = cudaGetLastError();
        if (launched != cudaSuccess) return launched;
        dkv_kernel<T, kD>
            <<<dim3(tiles, static_cast<unsigned>(dims.kv_heads)), kThreads, dkv_bytes, stream>>>(
                d_o, qp, kp, vp, lse, delta, static_cast<T*>(dk), static_cast<T*>(dv), dims, docs,
                begin, end);
        return cudaGetLastError();
      });
}

}  // namespace

cudaError_t flash_attention_delta(const void* d_out, const void* out, const FlashDims& dims,
                                  FloatType type, float* delta, cudaStream_t stream) {
  const int64_t rows = dims.heads * dims.tokens;
  if (rows == 0) return cudaSuccess;
  constexpr int64_t kRowsPerBlock = kThreads / 32;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 65536));
  return with_float_type(type, [&](auto* tag) -> cudaError_t {
    using T = std::remove_pointer_t<decltype(tag)>;
    delta_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(d_out),
                                                     static_cast<const T*>(out), dims, delta);
    return cudaGetLastError();
  });
}

cudaError_t flash_attention_backward(const void* d_out, const void* q, const void* k, const void* v,
                                     const float* lse, const float* delta, const int32_t* cu,
                                     int64_t documents, const FlashDims& dims, FloatType type,
                                     void* dq, void* dk, void* dv, cudaStream_t stream) {
  if (flash_attention_backward_on_tensor_cores(d_out, q, k, v, dq, dk, dv, dims, type))
    return flash_attention_backward_mma(d_out, q, k, v, lse, delta, cu, documents, dims, type, dq,
                                        dk, dv, stream);
  return flash_attention_backward_simt(d_out, q, k, v, lse, delta, cu, documents, dims, type, dq,
                                       dk, dv, stream);
}

cudaError_t flash_attention_backward_simt(const void* d_out, const void* q, const void* k,
                                          const void* v, const float* lse, const float* delta,
                                          const int32_t* cu, int64_t documents,
                                          const FlashDims& dims, FloatType type, void* dq, void* dk,
                                          void* dv, cudaStream_t stream) {
  if (dims.tokens == 0 || dims.heads == 0) return cudaSuccess;
  return with_float_type(type, [&](auto* tag) -> cudaError_t {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (dims.head_dim == 64)
      return launch_backward<T, 64>(d_out, q, k, v, lse, delta, cu, documents, dims, dq, dk, dv,
                                    stream);
    if (dims.head_dim == 128)
      return launch_backward<T, 128>(d_out, q, k, v, lse, delta, cu, documents, dims, dq, dk, dv,
                                     stream);
    return cudaErrorInvalidValue;
  });
}

}  // namespace headroom::cuda
