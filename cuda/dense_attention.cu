// The dense_additive attention kernels besides the products (which are
// cuBLASLt's): the additive mask, the per-head layout/dtype copies (repeat_kv
// and its sum), the mask's broadcast add onto the scores, _safe_softmax with
// its -inf bookkeeping, and softmax's backward. cpu/dense_attention.cc is the
// reference, element for element.
//
// Numerics: fp32 math, bf16/fp16 widened on load and rounded to nearest even
// once on store. mask, heads and add_mask give the cpu's bits exactly (the
// same operations in the same order). The two row kernels reduce a row in a
// fixed tree (strided per-thread partials, then a warp butterfly and one
// across warps; the block size depends only on S), not the cpu's left-to-right
// loop, and expf is CUDA's (within 2 ulp) rather than glibc's: so softmax and
// its backward differ from the cpu by rounding only, and are the same bits on
// every run. No atomics.
//
// Allocates: nothing (no temporaries: one block per row keeps each row's
// reductions in shared memory).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include <type_traits>

#include "backend/common/attention_mask.h"
#include "kernels_attention.h"
#include "storage.cuh"

namespace headroom::cuda {

namespace {

constexpr int kThreads = 256;

int elementwise_grid(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

// ---- mask

// The offsets of up to kMaskDocuments documents, passed by value: the kernel
// finds a token's document without cu_seqlens in device memory (the op gets
// no device buffer for it). Longer lists take one launch per chunk.
constexpr int kMaskDocuments = 512;
struct MaskDocuments {
  int32_t offsets[kMaskDocuments + 1];  // document d of the chunk: [offsets[d], offsets[d + 1])
  int32_t count = 0;
};

template <typename T>
__global__ void mask_kernel(MaskDocuments docs, AttentionMask spec, int64_t seq, float hidden,
                            T* mask) {
  const int64_t first = docs.offsets[0];
  const int64_t n = (static_cast<int64_t>(docs.offsets[docs.count]) - first) * seq;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = first + idx / seq, j = idx % seq;
    const int d = document_of(docs.offsets, docs.count, i);
    const KeyInterval keys =
        visible_keys_in_document(spec, docs.offsets[d], docs.offsets[d + 1], i);
    const int64_t key = i / seq * seq + j;  // row (b = i / S) holds keys b*S .. b*S + S - 1
    store(mask + i * seq + j, key >= keys.lo && key < keys.hi ? 0.0f : hidden);
  }
}

// ---- heads

template <typename Src, typename Dst>
__global__ void heads_kernel(const Src* x, DenseHeads from, Dst* y, DenseHeads to, int64_t rows,
                             int64_t seq, int64_t dim, float scale) {
  const int64_t n = rows * to.heads * seq * dim;
  const int64_t repeat = to.heads >= from.heads ? to.heads / from.heads : 1;
  const int64_t group = from.heads > to.heads ? from.heads / to.heads : 1;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Walk dst in its own memory order, so the stores coalesce.
    const int64_t e = idx % dim, r = idx / dim;
    int64_t b, h, s;
    if (to.token_major) {
      h = r % to.heads;
      const int64_t token = r / to.heads;
      b = token / seq, s = token % seq;
    } else {
      s = r % seq;
      const int64_t bh = r / seq;
      h = bh % to.heads, b = bh / to.heads;
    }
    float sum = 0;  // from 0 like the cpu: -0 becomes +0 there too
    for (int64_t g = 0; g < group; ++g) {
      const int64_t hs = h / repeat * group + g;
      const int64_t at = from.token_major ? ((b * seq + s) * from.heads + hs) * dim
                                          : ((b * from.heads + hs) * seq + s) * dim;
      sum += widen(x[at + e]);
    }
    store(y + idx, scale * sum);
  }
}

// ---- add_mask

template <typename M>
__global__ void add_mask_kernel(float* scores, const M* mask, int64_t rows, int64_t heads,
                                int64_t seq) {
  const int64_t block = seq * seq, n = rows * heads * block;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = idx / (heads * block), ij = idx % block;
    scores[idx] = scores[idx] + widen(mask[b * block + ij]);
  }
}

// ---- row reductions: one block per row, blockDim a power of two in [32, 1024]

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// A butterfly: every lane ends with the same value (each step combines the
// same pair, and + and fmaxf are commutative).
template <typename Op>
__device__ float warp_reduce(float v, Op op) {
  for (int mask = 16; mask > 0; mask >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, mask));
  return v;
}

// The block's reduction, returned to every thread. `shared` holds 32 floats;
// the first barrier keeps a fast warp from overwriting what a slow warp still
// reads from the previous call.
template <typename Op>
__device__ float block_reduce(float v, Op op, float identity, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_reduce(lane < warps ? shared[lane] : identity, op);
}

int row_threads(int64_t seq) {
  int threads = 32;
  while (threads < 1024 && threads < seq)
    threads *= 2;
  return threads;
}

int row_grid(int64_t rows) {
  return static_cast<int>(rows < 65535 ? rows : 65535);
}

__global__ void softmax_kernel(const float* x, float* sm, uint8_t* neg_inf, uint8_t* neg_inf_rows,
                               float* probs, int64_t rows, int64_t seq) {
  __shared__ float shared[32];
  const float kNegInf = -CUDART_INF_F;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r * seq;
    // The row's max (fmaxf skips NaN, as the cpu's std::max(max, x) does)
    // and whether any element is not -inf.
    float max = kNegInf;
    int visible = 0;
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      const float v = x[o + j];
      max = fmaxf(max, v);
      visible |= v != kNegInf;
    }
    max = block_reduce(max, Max(), kNegInf, shared);
    const bool all_masked = __syncthreads_or(visible) == 0;
    float sum = 0;
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
      sum += expf(x[o + j] - max);
    sum = block_reduce(sum, Sum(), 0.0f, shared);
    // exp is recomputed rather than stored and reread: the same value, one
    // pass less over the row.
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      const float v = x[o + j];
      const float s = expf(v - max) / sum;
      sm[o + j] = s;
      neg_inf[o + j] = v == kNegInf;
      probs[o + j] = all_masked ? 0.0f : s;
    }
    if (threadIdx.x == 0) neg_inf_rows[r] = all_masked;
  }
}

__global__ void softmax_backward_kernel(const float* dp, const float* p, float* ds, int64_t rows,
                                        int64_t seq) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r * seq;
    float dot = 0;
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
      dot += dp[o + j] * p[o + j];
    dot = block_reduce(dot, Sum(), 0.0f, shared);
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
      ds[o + j] = p[o + j] * (dp[o + j] - dot);
  }
}

}  // namespace

cudaError_t dense_attention_mask(const int32_t* cu, int64_t documents, uint8_t mask_kind,
                                 int64_t window, int64_t mask_block, int64_t seq, float hidden,
                                 void* mask, FloatType mask_type, cudaStream_t stream) {
  AttentionMask spec;
  spec.kind = static_cast<AttentionMaskKind>(mask_kind);
  spec.window = window;
  spec.mask_block = mask_block;
  for (int64_t d0 = 0; d0 < documents; d0 += kMaskDocuments) {
    MaskDocuments docs;
    docs.count =
        static_cast<int32_t>(documents - d0 < kMaskDocuments ? documents - d0 : kMaskDocuments);
    for (int32_t d = 0; d <= docs.count; ++d)
      docs.offsets[d] = cu[d0 + d];
    const int64_t n = (static_cast<int64_t>(docs.offsets[docs.count]) - docs.offsets[0]) * seq;
    if (n == 0) continue;
    const cudaError_t status = with_float_type(mask_type, [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      mask_kernel<<<elementwise_grid(n), kThreads, 0, stream>>>(docs, spec, seq, hidden,
                                                                static_cast<T*>(mask));
      return cudaGetLastError();
    });
    if (status != cudaSuccess) return status;
  }
  return cudaGetLastError();
}

cudaError_t dense_attention_heads(const void* src, FloatType src_type, DenseHeads src_layout,
                                  void* dst, FloatType dst_type, DenseHeads dst_layout,
                                  int64_t rows, int64_t seq, int64_t head_dim, float scale,
                                  cudaStream_t stream) {
  const int64_t n = rows * dst_layout.heads * seq * head_dim;
  if (n == 0) return cudaGetLastError();
  return with_float_type(src_type, [&](auto* s) {
    using S = std::remove_pointer_t<decltype(s)>;
    return with_float_type(dst_type, [&](auto* d) {
      using D = std::remove_pointer_t<decltype(d)>;
      heads_kernel<<<elementwise_grid(n), kThreads, 0, stream>>>(
          static_cast<const S*>(src), src_layout, static_cast<D*>(dst), dst_layout, rows, seq,
          head_dim, scale);
      return cudaGetLastError();
    });
  });
}

cudaError_t dense_attention_add_mask(float* scores, const void* mask, FloatType mask_type,
                                     int64_t rows, int64_t heads, int64_t seq,
                                     cudaStream_t stream) {
  const int64_t n = rows * heads * seq * seq;
  if (n == 0) return cudaGetLastError();
  return with_float_type(mask_type, [&](auto* type) {
    using M = std::remove_pointer_t<decltype(type)>;
    add_mask_kernel<<<elementwise_grid(n), kThreads, 0, stream>>>(
        scores, static_cast<const M*>(mask), rows, heads, seq);
    return cudaGetLastError();
  });
}

cudaError_t dense_attention_softmax(const float* scores, float* softmax, uint8_t* neg_inf,
                                    uint8_t* neg_inf_rows, float* probs, int64_t rows, int64_t seq,
                                    cudaStream_t stream) {
  if (rows == 0 || seq == 0) return cudaGetLastError();
  softmax_kernel<<<row_grid(rows), row_threads(seq), 0, stream>>>(scores, softmax, neg_inf,
                                                                  neg_inf_rows, probs, rows, seq);
  return cudaGetLastError();
}

cudaError_t dense_attention_softmax_backward(const float* d_probs, const float* probs,
                                             float* d_scores, int64_t rows, int64_t seq,
                                             cudaStream_t stream) {
  if (rows == 0 || seq == 0) return cudaGetLastError();
  softmax_backward_kernel<<<row_grid(rows), row_threads(seq), 0, stream>>>(d_probs, probs, d_scores,
                                                                           rows, seq);
  return cudaGetLastError();
}

}  // namespace headroom::cuda
