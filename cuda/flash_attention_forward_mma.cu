// Block-sparse flash attention forward on tensor cores, bf16 and fp16
// (flash_attention_forward.cu is the SIMT kernel, and the one for fp32):
// the same result, out = softmax(scale q k^T) v over each query's visible
// keys and lse, from FlashAttention-2's loop on mma.sync m16n8k16 with fp32
// accumulators (sm_80 and later, which sm_90 runs).
//
// Grid: x = query tiles of kBQ = 64 tokens of a document chunk, y = heads.
// Block: 4 warps; warp w owns query rows 16 w .. 16 w + 15 of the tile, and
// in them every key of a kBK = 64 key tile and every output column. Lane l
// holds rows 16 w + l / 4 and that + 8 (mma_fragments.h), so a row's max
// and sum are over the 4 lanes of a quad (two shuffles), and the row sums
// stay per-lane partials until the end (a quad shares one max, so its
// partials rescale alike).
// Per key tile: S = Q K^T (Q's fragments loaded into registers once), the
// mask and the online softmax on S's accumulators, then O += P V with P
// rounded to the operand dtype in the registers S was computed in (C's
// layout of two adjacent n-tiles is A's of one k-step), as FlashAttention-2
// does: the one difference from the SIMT kernel's numerics, ~2^-9 relative
// per probability in bf16, 2^-12 in fp16, below the output's own rounding.
// The key range walked and the full-tile test are the SIMT kernel's (its
// header): fully masked tiles are never read, fully visible ones skip the
// per-element mask.
// Shared memory (dynamic, 16-bit): Q [64][D + 8], K [64][D + 8] and V
// transposed, Vt [D][64 + 8]; 27 KiB at D = 64, 52 KiB at D = 128. The 8
// extra halves per row put the 8 rows a fragment load touches on distinct
// banks. Q and K are copied with cp.async (16 bytes a thread, zero-filled
// past the last row), V through registers to transpose it, so that every
// B fragment of either product is one 32-bit shared load.
// Deterministic: fixed order, no atomics. Allocates: nothing.
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

constexpr int kThreadsMma = mma::kThreads;
constexpr int kBQ = mma::kTile, kBK = 64;
constexpr float kMinusInfinity = -__builtin_huge_valf();

template <int kD>
constexpr size_t mma_forward_shared_bytes() {
  return sizeof(uint16_t) *
         (static_cast<size_t>(kBQ) * (kD + kPad) + static_cast<size_t>(kBK) * (kD + kPad) +
          static_cast<size_t>(kD) * (kBK + kPad));
}

template <typename T, int kD>
__global__ void __launch_bounds__(kThreadsMma)
    mma_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                       float* lse, FlashDims dims, Documents docs, int64_t begin, int64_t end) {
  constexpr int kLQ = kD + kPad, kLV = kBK + kPad;
  constexpr int kSteps = kD / mma::kK;  // k-steps of S = Q K^T
  constexpr int kKeyTiles = kBK / mma::kN;
  constexpr int kColumnTiles = kD / mma::kN;
  extern __shared__ uint16_t shared_halves[];
  uint16_t* qs = shared_halves;   // [kBQ][kLQ]
  uint16_t* ks = qs + kBQ * kLQ;  // [kBK][kLQ]
  uint16_t* vt = ks + kBK * kLQ;  // [kD][kLV]

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t h = blockIdx.y, g = h / (dims.heads / dims.kv_heads);
  const int64_t q_stride = dims.heads * kD, kv_stride = dims.kv_heads * kD;
  const int64_t q0 = begin + static_cast<int64_t>(blockIdx.x) * kBQ;
  const int64_t nq = end - q0 < kBQ ? end - q0 : kBQ;

  const KeyInterval first = flash::row_keys(dims.mask, docs, q0);
  const KeyInterval last = flash::row_keys(dims.mask, docs, q0 + nq - 1);
  // This lane's two rows (C's floats 0, 1 and 2, 3), their visible keys;
  // padding rows see nothing.
  const int row[2] = {16 * warp + mma::c_cell(lane, 0).row, 16 * warp + mma::c_cell(lane, 2).row};
  int64_t row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    row_lo[i] = 0;
    row_hi[i] = 0;
    if (row[i] < nq) {
      const KeyInterval keys = flash::row_keys(dims.mask, docs, q0 + row[i]);
      row_lo[i] = keys.lo;
      row_hi[i] = keys.hi;
    }
  }

  copy_tile_async<kBQ, kD>(qs, kLQ, q + h * kD, q_stride, q0, nq);
  wait_async_copies();
  __syncthreads();
  uint32_t qa[kSteps][4];  // this warp's Q rows as A fragments
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const mma::Cell cell = mma::a_cell(lane, r, 0);
      qa[s][r] = load_pair(qs + (16 * warp + cell.row) * kLQ + s * mma::kK + cell.col);
    }

  float row_max[2] = {kMinusInfinity, kMinusInfinity}, row_sum[2] = {0.0f, 0.0f};
  float acc[kColumnTiles][4];
#pragma unroll
  for (int n = 0; n < kColumnTiles; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[n][i] = 0.0f;

  for (int64_t k0 = first.lo; k0 < last.hi; k0 += kBK) {
    const int64_t nk = last.hi - k0 < kBK ? last.hi - k0 : kBK;
    __syncthreads();  // the previous tile's readers are done
    copy_tile_async<kBK, kD>(ks, kLQ, k + g * kD, kv_stride, k0, nk);
    copy_tile_transposed<kBK, kD>(vt, kLV, v + g * kD, kv_stride, k0, nk);
    wait_async_copies();
    __syncthreads();

    // S = Q K^T over this warp's 16 rows and the tile's 64 keys.
    float s[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        s[j][i] = 0.0f;
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        uint32_t b[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // B[kk][n] = K[key n][column kk]: two columns of one key row.
          const mma::Cell cell = mma::b_cell(lane, r, 0);
          b[r] = load_pair(ks + (mma::kN * j + cell.col) * kLQ + st * mma::kK + cell.row);
        }
        Operand<T>::mma(s[j], qa[st], b);
      }
    }

    const bool full = nk == kBK && last.lo <= k0 && first.hi >= k0 + kBK;
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // the lane's two rows
      float tile_max = kMinusInfinity;
#pragma unroll
      for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = 2 * half + e;
          float x = s[j][i] * dims.scale;
          if (!full) {
            const int64_t key = k0 + mma::kN * j + mma::c_cell(lane, i).col;
            if (key < row_lo[half] || key >= row_hi[half]) x = kMinusInfinity;
          }
          s[j][i] = x;
          tile_max = fmaxf(tile_max, x);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[half], tile_max);
      // While a row has seen no key its max is -inf: subtract 0 instead, so
      // the factor is exp(-inf) = 0 and masked scores give exp(-inf) = 0.
      const float base = new_max == kMinusInfinity ? 0.0f : new_max;
      const float factor = expf(row_max[half] - base);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = expf(s[j][2 * half + e] - base);
          s[j][2 * half + e] = p;
          tile_sum += p;
        }
      row_max[half] = new_max;
      row_sum[half] = row_sum[half] * factor + tile_sum;
#pragma unroll
      for (int n = 0; n < kColumnTiles; ++n) {
        acc[n][2 * half] *= factor;
        acc[n][2 * half + 1] *= factor;
      }
    }

    // O += P V: k-step t takes the probabilities of key tiles 2t and 2t + 1.
#pragma unroll
    for (int t = 0; t < kBK / mma::kK; ++t) {
      uint32_t a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float* p = s[2 * t + r / 2];
        a[r] = Operand<T>::pack(p[mma::c_index_of_a(r, 0)], p[mma::c_index_of_a(r, 1)]);
      }
#pragma unroll
      for (int n = 0; n < kColumnTiles; ++n) {
        uint32_t b[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // B[kk][n] = V[key kk][column n] = Vt[column n][key kk].
          const mma::Cell cell = mma::b_cell(lane, r, 0);
          b[r] = load_pair(vt + (mma::kN * n + cell.col) * kLV + t * mma::kK + cell.row);
        }
        Operand<T>::mma(acc[n], a, b);
      }
    }
  }

  // The quad's partial sums; every row saw its own key, so sum >= 1.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    row_sum[half] += __shfl_xor_sync(0xffffffffu, row_sum[half], 1);
    row_sum[half] += __shfl_xor_sync(0xffffffffu, row_sum[half], 2);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (row[half] >= nq) continue;
    const float inverse = 1.0f / row_sum[half];
    uint16_t* out_row = out + (q0 + row[half]) * q_stride + h * kD;
#pragma unroll
    for (int n = 0; n < kColumnTiles; ++n) {
      const int col = mma::kN * n + mma::c_cell(lane, 2 * half).col;
      *reinterpret_cast<uint32_t*>(out_row + col) =
          Operand<T>::pack(acc[n][2 * half] * inverse, acc[n][2 * half + 1] * inverse);
    }
    if (lane % 4 == 0) lse[h * dims.tokens + q0 + row[half]] = row_max[half] + logf(row_sum[half]);
  }
}

template <typename T, int kD>
cudaError_t launch_mma_forward(const void* q, const void* k, const void* v, const int32_t* cu,
                               int64_t documents, const FlashDims& dims, void* out, float* lse,
                               cudaStream_t stream) {
  constexpr size_t bytes = mma_forward_shared_bytes<kD>();
  cudaError_t err =
      cudaFuncSetAttribute(mma_forward_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (err != cudaSuccess) return err;
  return flash::for_each_chunk(
      cu, documents, dims.mask, dims.tokens,
      [&](const Documents& docs, int64_t begin, int64_t end) -> cudaError_t {
        const dim3 grid(static_cast<unsigned>((end - begin + kBQ - 1) / kBQ),
                        static_cast<unsigned>(dims.heads));
        mma_forward_kernel<T, kD><<<grid, kThreadsMma, bytes, stream>>>(
            static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k),
            static_cast<const uint16_t*>(v), static_cast<uint16_t*>(out), lse, dims, docs, begin,
            end);
        return cudaGetLastError();
      });
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool flash_attention_forward_on_tensor_cores(const void* q, const void* k, const void* v,
                                             const void* out, const FlashDims& dims,
                                             FloatType type) {
  return type != FloatType::kF32 && flash_attention_head_dim_supported(dims.head_dim) &&
         aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
}

cudaError_t flash_attention_forward_mma(const void* q, const void* k, const void* v,
                                        const int32_t* cu, int64_t documents, const FlashDims& dims,
                                        FloatType type, void* out, float* lse,
                                        cudaStream_t stream) {
  if (!flash_attention_forward_on_tensor_cores(q, k, v, out, dims, type))
    return cudaErrorInvalidValue;
  if (dims.tokens == 0 || dims.heads == 0) return cudaSuccess;
  return with_float_type(type, [&](auto* tag) -> cudaError_t {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      if (dims.head_dim == 64)
        return launch_mma_forward<T, 64>(q, k, v, cu, documents, dims, out, lse, stream);
      return launch_mma_forward<T, 128>(q, k, v, cu, documents, dims, out, lse, stream);
    }
  });
}

}  // namespace headroom::cuda
