// Block-sparse flash attention forward on cuda (cpu/attention.cc's forward):
// out = softmax(scale q k^T) v over each query's visible keys, lse written.
//
// SIMT (CUDA cores, fp32 FMA), FlashAttention-2's loop: fp32, and bf16 /
// fp16 where flash_attention_forward_mma.cu's tensor cores do not take the
// call (an unaligned pointer).
// Grid: x = query tiles of kBQ = 64 tokens of a document chunk, y = heads.
// Block: 256 threads, row group ty = tid / 16 owns query rows ty + 16 i
// (i < 4), column group tx = tid % 16 owns keys tx + 16 j (j < 2) of a key
// tile and output columns tx + 16 c (c < D / 16). A row's 16 column groups
// are one half-warp, so its max and sum are shuffle trees.
// Tiles: fixed kBQ x kBK = 64 x 32 whatever params.block_size is (it only
// sets the cpu's tile plan; the walked keys here are the same visible set).
// The key range of a query tile [q0, q1) is [lo(q0), hi(q1 - 1)), computed
// on device from the document offsets (attention_mask.h): the union of its
// rows' intervals, contiguous because lo and hi never decrease, so every key
// tile walked holds a visible pair and nothing else is read. A key tile is
// full (no per-element mask) when it holds kBK keys, lo(q1 - 1) <= its first
// key and hi(q0) >= its last + 1; otherwise each row keeps [lo(i), hi(i)).
// Shared memory (dynamic, fp32): Q tile [64][D+1], K and V tiles [32][D+1],
// P [64][33]; 41.7 KiB at D = 64, 74.5 KiB at D = 128 (the +1 columns keep
// the K reads of a half-warp on distinct banks).
// Numerics vs cpu: the same online softmax (max of scale * score, rescale by
// exp(old - new), 0 while the max is -inf), out = acc * (1 / sum), lse =
// max + log(sum); fp32 throughout, operands widened exactly on load, one
// rounding on store. Differences: the dot products and row sums are added in
// another order, and expf / logf (accurate to ~1 ulp) replace the cpu's
// exp_approx: rounding-level. Deterministic: fixed order, no atomics.
// Allocates: nothing.
#include <cstdint>
#include <type_traits>

#include "kernels_flash_attention.h"

namespace headroom::cuda {

namespace {

using flash::Documents;
using flash::kGroups;
using flash::kThreads;

constexpr int kBQ = 64, kBK = 32;
constexpr int kRM = kBQ / kGroups, kRN = kBK / kGroups;
constexpr int kLP = kBK + 1;

template <int kD>
constexpr size_t forward_shared_bytes() {
  return sizeof(float) * (static_cast<size_t>(kBQ) * (kD + 1) +
                          2 * static_cast<size_t>(kBK) * (kD + 1) + kBQ * kLP);
}

constexpr float kMinusInfinity = -__builtin_huge_valf();

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* q, const T* k, const T* v, T* out, float* lse, FlashDims dims,
                   Documents docs, int64_t begin, int64_t end) {
  constexpr int kLD = kD + 1, kDC = kD / kGroups;
  extern __shared__ float shared[];
  float* qs = shared;          // [kBQ][kLD]
  float* ks = qs + kBQ * kLD;  // [kBK][kLD]
  float* vs = ks + kBK * kLD;  // [kBK][kLD]
  float* ps = vs + kBK * kLD;  // [kBQ][kLP]

  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  const int64_t h = blockIdx.y, g = h / (dims.heads / dims.kv_heads);
  const int64_t q_stride = dims.heads * kD, kv_stride = dims.kv_heads * kD;
  const int64_t q0 = begin + static_cast<int64_t>(blockIdx.x) * kBQ;
  const int64_t nq = end - q0 < kBQ ? end - q0 : kBQ;

  // Every thread computes the tile's bounds itself (uniform, no sync).
  const KeyInterval first = flash::row_keys(dims.mask, docs, q0);
  const KeyInterval last = flash::row_keys(dims.mask, docs, q0 + nq - 1);
  int64_t row_lo[kRM], row_hi[kRM];
  flash::tile_row_keys(dims.mask, docs, q0, nq, ty, row_lo, row_hi);

  flash::load_tile<kBQ, kD>(qs, kLD, q + h * kD, q_stride, q0, nq);

  float row_max[kRM], row_sum[kRM], acc[kRM][kDC];
#pragma unroll
  for (int i = 0; i < kRM; ++i) {
    row_max[i] = kMinusInfinity;
    row_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kDC; ++c)
      acc[i][c] = 0.0f;
  }

  for (int64_t k0 = first.lo; k0 < last.hi; k0 += kBK) {
    const int64_t nk = last.hi - k0 < kBK ? last.hi - k0 : kBK;
    __syncthreads();  // the previous tile's readers are done (and qs is written)
    flash::load_tile<kBK, kD>(ks, kLD, k + g * kD, kv_stride, k0, nk);
    flash::load_tile<kBK, kD>(vs, kLD, v + g * kD, kv_stride, k0, nk);
    __syncthreads();

    float s[kRM][kRN];
#pragma unroll
    for (int i = 0; i < kRM; ++i)
#pragma unroll
      for (int j = 0; j < kRN; ++j)
        s[i][j] = 0.0f;
#pragma unroll 8
    for (int d = 0; d < kD; ++d) {
      float a[kRM], b[kRN];
#pragma unroll
      for (int i = 0; i < kRM; ++i)
        a[i] = qs[(ty + kGroups * i) * kLD + d];
#pragma unroll
      for (int j = 0; j < kRN; ++j)
        b[j] = ks[(tx + kGroups * j) * kLD + d];
#pragma unroll
      for (int i = 0; i < kRM; ++i)
#pragma unroll
        for (int j = 0; j < kRN; ++j)
          s[i][j] = fmaf(a[i], b[j], s[i][j]);
    }

    const bool full = nk == kBK && last.lo <= k0 && first.hi >= k0 + kBK;
#pragma unroll
    for (int i = 0; i < kRM; ++i) {
      float tile_max = kMinusInfinity;
#pragma unroll
      for (int j = 0; j < kRN; ++j) {
        float x = s[i][j] * dims.scale;
        if (!full) {
          const int64_t key = k0 + tx + kGroups * j;
          if (key < row_lo[i] || key >= row_hi[i]) x = kMinusInfinity;
        }
        s[i][j] = x;
        tile_max = fmaxf(tile_max, x);
      }
#pragma unroll
      for (int offset = kGroups / 2; offset > 0; offset /= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      const float new_max = fmaxf(row_max[i], tile_max);
      // While a row has seen no key its max is -inf: subtract 0 instead, so
      // the factor is exp(-inf) = 0 and masked scores give exp(-inf) = 0.
      const float base = new_max == kMinusInfinity ? 0.0f : new_max;
      const float factor = expf(row_max[i] - base);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kRN; ++j) {
        const float p = expf(s[i][j] - base);
        ps[(ty + kGroups * i) * kLP + tx + kGroups * j] = p;
        tile_sum += p;
      }
#pragma unroll
      for (int offset = kGroups / 2; offset > 0; offset /= 2)
        tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, offset);
      row_max[i] = new_max;
      row_sum[i] = row_sum[i] * factor + tile_sum;
#pragma unroll
      for (int c = 0; c < kDC; ++c)
        acc[i][c] *= factor;
    }
    __syncthreads();  // ps complete

    // acc += P V over the tile's keys (padding keys have P = 0, V = 0).
    flash::accumulate_product<kRM, kBK, kD>(acc, ps, kLP, vs, tx, ty);
  }

  // Every row saw its own key (attention_mask.h), so sum >= 1.
#pragma unroll
  for (int i = 0; i < kRM; ++i) {
    const int r = ty + kGroups * i;
    if (r >= nq) continue;
    const float inverse = 1.0f / row_sum[i];
    T* out_row = out + (q0 + r) * q_stride + h * kD;
#pragma unroll
    for (int c = 0; c < kDC; ++c)
      flash::store(out_row + tx + kGroups * c, acc[i][c] * inverse);
    if (tx == 0) lse[h * dims.tokens + q0 + r] = row_max[i] + logf(row_sum[i]);
  }
}

template <typename T, int kD>
cudaError_t launch_forward(const void* q, const void* k, const void* v, const int32_t* cu,
                           int64_t documents, const FlashDims& dims, void* out, float* lse,
                           cudaStream_t stream) {
  constexpr size_t bytes = forward_shared_bytes<kD>();
  cudaError_t err = cudaFuncSetAttribute(
      forward_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (err != cudaSuccess) return err;
  return flash::for_each_chunk(
      cu, documents, dims.mask, dims.tokens,
      [&](const Documents& docs, int64_t begin, int64_t end) -> cudaError_t {
        const dim3 grid(static_cast<unsigned>((end - begin + kBQ - 1) / kBQ),
                        static_cast<unsigned>(dims.heads));
        forward_kernel<T, kD><<<grid, kThreads, bytes, stream>>>(
            static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
            static_cast<T*>(out), lse, dims, docs, begin, end);
        return cudaGetLastError();
      });
}

}  // namespace

bool flash_attention_head_dim_supported(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128;
}

cudaError_t flash_attention_forward(const void* q, const void* k, const void* v, const int32_t* cu,
                                    int64_t documents, const FlashDims& dims, FloatType type,
                                    void* out, float* lse, cudaStream_t stream) {
  if (flash_attention_forward_on_tensor_cores(q, k, v, out, dims, type))
    return flash_attention_forward_mma(q, k, v, cu, documents, dims, type, out, lse, stream);
  return flash_attention_forward_simt(q, k, v, cu, documents, dims, type, out, lse, stream);
}

cudaError_t flash_attention_forward_simt(const void* q, const void* k, const void* v,
                                         const int32_t* cu, int64_t documents,
                                         const FlashDims& dims, FloatType type, void* out,
                                         float* lse, cudaStream_t stream) {
  if (dims.tokens == 0 || dims.heads == 0) return cudaSuccess;
  return with_float_type(type, [&](auto* tag) -> cudaError_t {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (dims.head_dim == 64)
      return launch_forward<T, 64>(q, k, v, cu, documents, dims, out, lse, stream);
    if (dims.head_dim == 128)
      return launch_forward<T, 128>(q, k, v, cu, documents, dims, out, lse, stream);
    return cudaErrorInvalidValue;
  });
}

}  // namespace headroom::cuda
