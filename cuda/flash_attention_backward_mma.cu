// Block-sparse flash attention backward on tensor cores, bf16 and fp16
// (flash_attention_backward.cu is the SIMT pair, and the one for fp32): the
// same two passes and equations, P recomputed from lse,
//   dP = dO V^T, dS = P * (dP - delta), dq = scale dS K      (dq kernel)
//   dv = P^T dO, dk = scale dS^T Q                         (dkv kernel)
// each output owned by one block, so no atomics and the same bits every
// call; products on mma.sync m16n8k16 with fp32 accumulators
// (mma_fragments.h, mma_tiles.cuh), blocks of 4 warps over 64-token tiles.
//
//   dq kernel: grid x = query tiles of a document chunk, y = heads; warp w
//     owns query rows 16 w ..; per key tile of the walked range (the SIMT
//     kernel's [lo(q0), hi(q1 - 1))): S = Q K^T and dP = dO V^T, then dS in
//     S's registers, then dq += dS K with dS as the A operand (C's layout of
//     two n-tiles is A's of one k-step). Shared: Q, dO, K, V [64][D + 8] and
//     K transposed [D][64 + 8]: 86 KiB at D = 128, 45 KiB at D = 64.
//   dkv kernel: grid x = key tiles, y = kv heads (at D = 128 two launches,
//     one for dv and one for dk: 128 accumulators for both spilled); warp w
//     owns keys 16 w ..;
//     for each query head of the group and each query tile of the range
//     that sees the key tile (the SIMT kernel's binary searches):
//     S^T = K Q^T and dP^T = V dO^T (keys as rows, so P^T and dS^T are
//     again A operands), then dv += P^T dO and dk += dS^T Q. A query's
//     lse, delta and visible keys are per column here: the block writes
//     them to shared memory once per query tile. Shared: K, V, Q, dO
//     [64][D + 8], Q and dO transposed [D][64 + 8], the query stats: 106 KiB
//     at D = 128, 55 KiB at D = 64.
// Masks as the SIMT kernels: a tile pair is full (no per-element test) when
// both tiles hold 64 tokens, lo(last query) <= first key and hi(first
// query) >= last key + 1; padding rows and columns are masked.
// Numerics: the SIMT kernels' fp32 formulas, with P and dS rounded to the
// operand dtype before the products they feed (FlashAttention-2's), dS of
// the dkv kernel computed from that rounded P (~2^-9 relative in bf16: the
// registers hold no fp32 copy at D = 128), and dot products summed in the
// tensor cores' order. Allocates: nothing.
#include <cstdint>
#include <type_traits>

#include "kernels_flash_attention.h"
#include "mma_fragments.h"
#include "mma_tiles.cuh"

namespace headroom::cuda {

namespace {

using flash::Documents;
using mma::copy_tile_async;
using mma::copy_tile_transposed;
using mma::kPad;
using mma::load_pair;
using mma::Operand;
using mma::wait_async_copies;

constexpr int kB = mma::kTile;      // 64: both tile edges
constexpr int kSub = kB / mma::kN;  // 8 n-tiles of 8 across a tile
constexpr int kLT = kB + kPad;      // row length of a transposed tile

template <int kD>
constexpr size_t dq_shared_bytes() {
  return sizeof(uint16_t) *
         (4 * static_cast<size_t>(kB) * (kD + kPad) + static_cast<size_t>(kD) * kLT);
}

template <int kD>
constexpr size_t dkv_shared_bytes() {
  return sizeof(uint16_t) *
             (4 * static_cast<size_t>(kB) * (kD + kPad) + 2 * static_cast<size_t>(kD) * kLT) +
         static_cast<size_t>(kB) * (2 * sizeof(int64_t) + 2 * sizeof(float));
}

// acc[j] = rows (16 w ..) of `a` times rows col0 + 8 j .. of `b`,
// transposed: this warp's 16 x kCols part of A B^T of two row-major
// [64][kD + kPad] shared tiles.
template <typename T, int kD, int kCols>
__device__ __forceinline__ void product_with_rows(float (&acc)[kCols / mma::kN][4],
                                                  const uint16_t* a, const uint16_t* b, int col0,
                                                  int warp, int lane) {
  constexpr int kLD = kD + kPad;
#pragma unroll
  for (int j = 0; j < kCols / mma::kN; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[j][i] = 0.0f;
#pragma unroll
  for (int st = 0; st < kD / mma::kK; ++st) {
    uint32_t af[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const mma::Cell cell = mma::a_cell(lane, r, 0);
      af[r] = load_pair(a + (16 * warp + cell.row) * kLD + st * mma::kK + cell.col);
    }
#pragma unroll
    for (int j = 0; j < kCols / mma::kN; ++j) {
      uint32_t bf[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const mma::Cell cell = mma::b_cell(lane, r, 0);
        bf[r] = load_pair(b + (col0 + mma::kN * j + cell.col) * kLD + st * mma::kK + cell.row);
      }
      Operand<T>::mma(acc[j], af, bf);
    }
  }
}

// This warp's 16 x kCols accumulators w as the A operands of the kCols / 16
// k-steps of a product over those columns, rounded to T (C's layout of
// n-tiles 2t and 2t + 1 is A's of k-step t). Packed, they take half the
// registers.
template <typename T, int kCols>
__device__ __forceinline__ void pack_operands(uint32_t (&af)[kCols / mma::kK][4],
                                              const float (&w)[kCols / mma::kN][4]) {
#pragma unroll
  for (int t = 0; t < kCols / mma::kK; ++t)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float* p = w[2 * t + r / 2];
      af[t][r] = Operand<T>::pack(p[mma::c_index_of_a(r, 0)], p[mma::c_index_of_a(r, 1)]);
    }
}

// Accumulator float i of n-tile j, as pack_operands rounded it.
template <typename T, int kSteps>
__device__ __forceinline__ float packed_element(const uint32_t (&af)[kSteps][4], int j, int i) {
  const float2 pair = Operand<T>::unpack(af[j / 2][2 * (j % 2) + i / 2]);
  return i % 2 == 0 ? pair.x : pair.y;
}

// out[n] += W X over inner indices inner0 .. inner0 + 16 kSteps: W the
// packed A operands of pack_operands, X the transposed tile xt [kD][kLT]
// (B[inner][column] = xt[column][inner]).
template <typename T, int kD, int kSteps>
__device__ __forceinline__ void product_from_registers(float (&out)[kD / mma::kN][4],
                                                       const uint32_t (&af)[kSteps][4],
                                                       const uint16_t* xt, int inner0, int lane) {
#pragma unroll
  for (int t = 0; t < kSteps; ++t) {
#pragma unroll
    for (int n = 0; n < kD / mma::kN; ++n) {
      uint32_t bf[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const mma::Cell cell = mma::b_cell(lane, r, 0);
        bf[r] = load_pair(xt + (mma::kN * n + cell.col) * kLT + inner0 + t * mma::kK + cell.row);
      }
      Operand<T>::mma(out[n], af[t], bf);
    }
  }
}

// rows r of a [kD / 8][4] accumulator (this lane's two rows, 16 w + ...)
// times `scale`, stored to `dst` rows `row0 + r` (< valid), `stride` apart.
template <typename T, int kD>
__device__ __forceinline__ void store_rows(uint16_t* dst, int64_t stride, int64_t row0,
                                           int64_t valid, const float (&acc)[kD / mma::kN][4],
                                           float scale, int warp, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp + mma::c_cell(lane, 2 * half).row;
    if (r >= valid) continue;
    uint16_t* row = dst + (row0 + r) * stride;
#pragma unroll
    for (int n = 0; n < kD / mma::kN; ++n) {
      const int col = mma::kN * n + mma::c_cell(lane, 2 * half).col;
      *reinterpret_cast<uint32_t*>(row + col) =
          Operand<T>::pack(acc[n][2 * half] * scale, acc[n][2 * half + 1] * scale);
    }
  }
}

// ---- dq: one block per (query tile, head)

template <typename T, int kD>
__global__ void __launch_bounds__(mma::kThreads)
    mma_dq_kernel(const uint16_t* d_out, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                  const float* lse, const float* delta, uint16_t* dq, FlashDims dims,
                  Documents docs, int64_t begin, int64_t end) {
  constexpr int kLD = kD + kPad;
  extern __shared__ uint16_t shared_halves[];
  uint16_t* qs = shared_halves;   // [kB][kLD]
  uint16_t* dos = qs + kB * kLD;  // [kB][kLD]
  uint16_t* ks = dos + kB * kLD;  // [kB][kLD]
  uint16_t* vs = ks + kB * kLD;   // [kB][kLD]
  uint16_t* kt = vs + kB * kLD;   // [kD][kLT]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t h = blockIdx.y, g = h / (dims.heads / dims.kv_heads);
  const int64_t q_stride = dims.heads * kD, kv_stride = dims.kv_heads * kD;
  const int64_t q0 = begin + static_cast<int64_t>(blockIdx.x) * kB;
  const int64_t nq = end - q0 < kB ? end - q0 : kB;

  const KeyInterval first = flash::row_keys(dims.mask, docs, q0);
  const KeyInterval last = flash::row_keys(dims.mask, docs, q0 + nq - 1);
  int64_t row_lo[2], row_hi[2];
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp + mma::c_cell(lane, 2 * half).row;
    row_lo[half] = row_hi[half] = 0;
    row_lse[half] = row_delta[half] = 0.0f;
    if (r < nq) {
      const KeyInterval keys = flash::row_keys(dims.mask, docs, q0 + r);
      row_lo[half] = keys.lo;
      row_hi[half] = keys.hi;
      row_lse[half] = lse[h * dims.tokens + q0 + r];
      row_delta[half] = delta[h * dims.tokens + q0 + r];
    }
  }

  copy_tile_async<kB, kD>(qs, kLD, q + h * kD, q_stride, q0, nq);
  copy_tile_async<kB, kD>(dos, kLD, d_out + h * kD, q_stride, q0, nq);

  float acc[kD / mma::kN][4];
#pragma unroll
  for (int n = 0; n < kD / mma::kN; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[n][i] = 0.0f;

  for (int64_t k0 = first.lo; k0 < last.hi; k0 += kB) {
    const int64_t nk = last.hi - k0 < kB ? last.hi - k0 : kB;
    __syncthreads();  // the previous tile's readers are done
    copy_tile_async<kB, kD>(ks, kLD, k + g * kD, kv_stride, k0, nk);
    copy_tile_async<kB, kD>(vs, kLD, v + g * kD, kv_stride, k0, nk);
    copy_tile_transposed<kB, kD>(kt, kLT, k + g * kD, kv_stride, k0, nk);
    wait_async_copies();  // (and, the first time, Q and dO)
    __syncthreads();

    float s[kSub][4], dp[kSub][4];
    product_with_rows<T, kD, kB>(s, qs, ks, 0, warp, lane);
    product_with_rows<T, kD, kB>(dp, dos, vs, 0, warp, lane);
    const bool full = nq == kB && nk == kB && last.lo <= k0 && first.hi >= k0 + kB;
#pragma unroll
    for (int j = 0; j < kSub; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int half = i / 2;
        const int64_t key = k0 + mma::kN * j + mma::c_cell(lane, i).col;
        const bool visible = full || (key >= row_lo[half] && key < row_hi[half]);
        const float p = visible ? expf(s[j][i] * dims.scale - row_lse[half]) : 0.0f;
        s[j][i] = p * (dp[j][i] - row_delta[half]);  // dS
      }
    uint32_t ds[kB / mma::kK][4];
    pack_operands<T, kB>(ds, s);
    product_from_registers<T, kD, kB / mma::kK>(acc, ds, kt, 0, lane);
  }
  store_rows<T, kD>(dq + h * kD, q_stride, q0, nq, acc, dims.scale, warp, lane);
}

// ---- dk, dv: one block per (key tile, kv head)

// Which of dk and dv a dkv block computes: both at D = 64; at D = 128 one
// launch each, since 128 accumulators for both leave ptxas no room for the
// 16 x 64 product tiles beside them (it spilled): the dk launch computes
// S^T again, 5 products where one launch has 4.
enum Outputs : int { kDv = 1, kDk = 2, kBoth = 3 };

// (At most one block per SM asked, so ptxas may use every register rather
// than spill to fit more.)
template <typename T, int kD, int kOutputs>
__global__ void __launch_bounds__(mma::kThreads, 1)
    mma_dkv_kernel(const uint16_t* d_out, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                   const float* lse, const float* delta, uint16_t* dk, uint16_t* dv, FlashDims dims,
                   Documents docs, int64_t begin, int64_t end) {
  constexpr int kLD = kD + kPad;
  extern __shared__ uint16_t shared_halves[];
  uint16_t* ks = shared_halves;                                 // [kB][kLD]
  uint16_t* vs = ks + kB * kLD;                                 // [kB][kLD]
  uint16_t* qs = vs + kB * kLD;                                 // [kB][kLD]
  uint16_t* dos = qs + kB * kLD;                                // [kB][kLD]
  uint16_t* qt = dos + kB * kLD;                                // [kD][kLT]
  uint16_t* dot = qt + kD * kLT;                                // [kD][kLT]
  auto* query_lo = reinterpret_cast<int64_t*>(dot + kD * kLT);  // [kB]
  int64_t* query_hi = query_lo + kB;                            // [kB]
  auto* query_lse = reinterpret_cast<float*>(query_hi + kB);    // [kB]
  float* query_delta = query_lse + kB;                          // [kB]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t g = blockIdx.y, group = dims.heads / dims.kv_heads;
  const int64_t q_stride = dims.heads * kD, kv_stride = dims.kv_heads * kD;
  const int64_t k0 = begin + static_cast<int64_t>(blockIdx.x) * kB;
  const int64_t nk = end - k0 < kB ? end - k0 : kB, k1 = k0 + nk;

  // The queries seeing any key of [k0, k1), as the SIMT kernel finds them.
  const KeyInterval queries = flash::queries_seeing_keys(dims.mask, docs, begin, end, k0, k1);
  const int64_t query_begin = queries.lo, query_end = queries.hi;

  // What each output needs: S^T (K, Q) for both; dv P^T dO (dO
  // transposed); dk dP^T (V, dO) and dS^T Q (Q transposed).
  constexpr bool kWantDv = (kOutputs & kDv) != 0, kWantDk = (kOutputs & kDk) != 0;
  copy_tile_async<kB, kD>(ks, kLD, k + g * kD, kv_stride, k0, nk);
  if constexpr (kWantDk) copy_tile_async<kB, kD>(vs, kLD, v + g * kD, kv_stride, k0, nk);

  constexpr int kDvColumns = kWantDv ? kD / mma::kN : 1, kDkColumns = kWantDk ? kD / mma::kN : 1;
  float dk_acc[kDkColumns][4], dv_acc[kDvColumns][4];  // this warp's 16 keys
#pragma unroll
  for (int n = 0; n < kDkColumns; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      dk_acc[n][i] = 0.0f;
#pragma unroll
  for (int n = 0; n < kDvColumns; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      dv_acc[n][i] = 0.0f;
  // This lane's two keys (rows of S^T), as offsets in the tile: 32 bits,
  // since at D = 128 every register counts.
  const int key[2] = {16 * warp + mma::c_cell(lane, 0).row, 16 * warp + mma::c_cell(lane, 2).row};

  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t q0 = query_begin; q0 < query_end; q0 += kB) {
      const int64_t nq = query_end - q0 < kB ? query_end - q0 : kB;
      const KeyInterval first = flash::row_keys(dims.mask, docs, q0);
      const KeyInterval last = flash::row_keys(dims.mask, docs, q0 + nq - 1);
      const bool full = nq == kB && nk == kB && last.lo <= k0 && first.hi >= k1;
      __syncthreads();  // the previous tile's readers are done
      copy_tile_async<kB, kD>(qs, kLD, q + h * kD, q_stride, q0, nq);
      if constexpr (kWantDk) {
        copy_tile_async<kB, kD>(dos, kLD, d_out + h * kD, q_stride, q0, nq);
        copy_tile_transposed<kB, kD>(qt, kLT, q + h * kD, q_stride, q0, nq);
      }
      if constexpr (kWantDv)
        copy_tile_transposed<kB, kD>(dot, kLT, d_out + h * kD, q_stride, q0, nq);
      // Padding queries see nothing.
      for (int r = threadIdx.x; r < kB; r += mma::kThreads) {
        KeyInterval keys{0, 0};
        float row_lse = 0.0f, row_delta = 0.0f;
        if (r < nq) {
          keys = flash::row_keys(dims.mask, docs, q0 + r);
          row_lse = lse[h * dims.tokens + q0 + r];
          row_delta = delta[h * dims.tokens + q0 + r];
        }
        query_lo[r] = keys.lo;
        query_hi[r] = keys.hi;
        query_lse[r] = row_lse;
        query_delta[r] = row_delta;
      }
      wait_async_copies();
      __syncthreads();

      // P^T first, packed (dv's operand), then dS^T = P^T * (dP^T - delta)
      // from the packed P^T: one 16 x 64 fp32 tile live at a time.
      uint32_t pt[kB / mma::kK][4];
      {
        float s[kSub][4];  // keys (rows) x queries (columns)
        product_with_rows<T, kD, kB>(s, ks, qs, 0, warp, lane);
#pragma unroll
        for (int j = 0; j < kSub; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int r = mma::kN * j + mma::c_cell(lane, i).col;  // the query
            const int64_t at_key = k0 + key[i / 2];
            const bool visible =
                full || (key[i / 2] < nk && at_key >= query_lo[r] && at_key < query_hi[r]);
            s[j][i] = visible ? expf(s[j][i] * dims.scale - query_lse[r]) : 0.0f;
          }
        pack_operands<T, kB>(pt, s);
      }
      if constexpr (kWantDv) product_from_registers<T, kD, kB / mma::kK>(dv_acc, pt, dot, 0, lane);
      if constexpr (kWantDk) {
        uint32_t dst[kB / mma::kK][4];
        {
          float dp[kSub][4];
          product_with_rows<T, kD, kB>(dp, vs, dos, 0, warp, lane);
#pragma unroll
          for (int j = 0; j < kSub; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int r = mma::kN * j + mma::c_cell(lane, i).col;
              dp[j][i] = packed_element<T>(pt, j, i) * (dp[j][i] - query_delta[r]);
            }
          pack_operands<T, kB>(dst, dp);
        }
        product_from_registers<T, kD, kB / mma::kK>(dk_acc, dst, qt, 0, lane);
      }
    }
  }
  if constexpr (kWantDk)
    store_rows<T, kD>(dk + g * kD, kv_stride, k0, nk, dk_acc, dims.scale, warp, lane);
  if constexpr (kWantDv)
    store_rows<T, kD>(dv + g * kD, kv_stride, k0, nk, dv_acc, 1.0f, warp, lane);
}

// Lets `kernel` take `bytes` of dynamic shared memory (past the 48 KiB default).
template <typename Kernel>
cudaError_t shared_bytes_for(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

template <typename T, int kD, int kOutputs>
cudaError_t launch_dkv(const uint16_t* d_o, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                       const float* lse, const float* delta, void* dk, void* dv,
                       const FlashDims& dims, const Documents& docs, int64_t begin, int64_t end,
                       unsigned tiles, cudaStream_t stream) {
  constexpr size_t bytes = dkv_shared_bytes<kD>();
  mma_dkv_kernel<T, kD, kOutputs>
      <<<dim3(tiles, static_cast<unsigned>(dims.kv_heads)), mma::kThreads, bytes, stream>>>(
          d_o, q, k, v, lse, delta, static_cast<uint16_t*>(dk), static_cast<uint16_t*>(dv), dims,
          docs, begin, end);
  return cudaGetLastError();
}

template <typename T, int kD>
cudaError_t launch_mma_backward(const void* d_out, const void* q, const void* k, const void* v,
                                const float* lse, const float* delta, const int32_t* cu,
                                int64_t documents, const FlashDims& dims, void* dq, void* dk,
                                void* dv, cudaStream_t stream) {
  constexpr size_t dq_bytes = dq_shared_bytes<kD>(), dkv_bytes = dkv_shared_bytes<kD>();
  cudaError_t err =
      cudaFuncSetAttribute(mma_dq_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(dq_bytes));
  if (err != cudaSuccess) return err;
  constexpr bool kSplit = kD == 128;
  if constexpr (kSplit) {
    err = shared_bytes_for(mma_dkv_kernel<T, kD, kDv>, dkv_bytes);
    if (err == cudaSuccess) err = shared_bytes_for(mma_dkv_kernel<T, kD, kDk>, dkv_bytes);
  } else {
    err = shared_bytes_for(mma_dkv_kernel<T, kD, kBoth>, dkv_bytes);
  }
  if (err != cudaSuccess) return err;
  const auto* d_o = static_cast<const uint16_t*>(d_out);
  const auto* qp = static_cast<const uint16_t*>(q);
  const auto* kp = static_cast<const uint16_t*>(k);
  const auto* vp = static_cast<const uint16_t*>(v);
  return flash::for_each_chunk(
      cu, documents, dims.mask, dims.tokens,
      [&](const Documents& docs, int64_t begin, int64_t end) -> cudaError_t {
        const auto tiles = static_cast<unsigned>((end - begin + kB - 1) / kB);
        mma_dq_kernel<T, kD>
            <<<dim3(tiles, static_cast<unsigned>(dims.heads)), mma::kThreads, dq_bytes, stream>>>(
                d_o, qp, kp, vp, lse, delta, static_cast<uint16_t*>(dq), dims, docs, begin, end);
        cudaError_t launched = cudaGetLastError();
        if (launched != cudaSuccess) return launched;
        if constexpr (kSplit) {
          launched = launch_dkv<T, kD, kDv>(d_o, qp, kp, vp, lse, delta, dk, dv, dims, docs, begin,
                                            end, tiles, stream);
          if (launched != cudaSuccess) return launched;
          return launch_dkv<T, kD, kDk>(d_o, qp, kp, vp, lse, delta, dk, dv, dims, docs, begin, end,
                                        tiles, stream);
        } else {
          return launch_dkv<T, kD, kBoth>(d_o, qp, kp, vp, lse, delta, dk, dv, dims, docs, begin,
                                          end, tiles, stream);
        }
      });
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool flash_attention_backward_on_tensor_cores(const void* d_out, const void* q, const void* k,
                                              const void* v, const void* dq, const void* dk,
                                              const void* dv, const FlashDims& dims,
                                              FloatType type) {
  return type != FloatType::kF32 && flash_attention_head_dim_supported(dims.head_dim) &&
         aligned16(d_out) && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dq) &&
         aligned16(dk) && aligned16(dv);
}

cudaError_t flash_attention_backward_mma(const void* d_out, const void* q, const void* k,
                                         const void* v, const float* lse, const float* delta,
                                         const int32_t* cu, int64_t documents,
                                         const FlashDims& dims, FloatType type, void* dq, void* dk,
                                         void* dv, cudaStream_t stream) {
  if (!flash_attention_backward_on_tensor_cores(d_out, q, k, v, dq, dk, dv, dims, type))
    return cudaErrorInvalidValue;
  if (dims.tokens == 0 || dims.heads == 0) return cudaSuccess;
  return with_float_type(type, [&](auto* tag) -> cudaError_t {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      if (dims.head_dim == 64)
        return launch_mma_backward<T, 64>(d_out, q, k, v, lse, delta, cu, documents, dims, dq, dk,
                                          dv, stream);
      return launch_mma_backward<T, 128>(d_out, q, k, v, lse, delta, cu, documents, dims, dq, dk,
                                         dv, stream);
    }
  });
}

}  // namespace headroom::cuda
