// embedding_forward: out[t, :] = table[ids[t], :], a pure copy (exact in any
// dtype); one block per token row, threads over the columns.
//
// embedding_backward: d_table[v, :] += sum of d_out[t, :] over the t with
// ids[t] == v, with cpu/embedding.cc's numerics: a repeated token's rows are
// summed in fp32 in token order and the sum is added to d_table once (one
// rounding per element per call). Like cpu, it first sorts the token indices
// by (id, index) into `order`, so each id's tokens form one run in token
// order, and then sums every run by columns: block (k, j) owns the run that
// starts at position k of the order (if one does) and column chunk j, and
// each of its threads walks that run for its column. No two threads write
// one element and no sum depends on the launch, so the bits are cpu's.
//
// The sort has no scratch beyond `order` (CUB's radix sort wants its own
// temporary storage), so it is a bitonic network on `order` in place, keyed
// by id * 2^32 + index (unique, so the result is the one sorted order):
// chunks of kChunk positions are sorted in shared memory, then each merge
// stage k > kChunk runs its comparators of distance >= kChunk as one launch
// each over global memory and the rest in shared memory per chunk. T need
// not be a power of two: positions >= T are +infinity that never move, so
// every comparator touching one is skipped. 1 + m (m + 3) / 2 launches for
// m = log2(T / kChunk) rounded up (10 at T = 16384).
//
// Id -1 is a token another rank's part of a vocabulary-parallel table holds:
// forward writes its row as 0 and backward adds nothing, as on cpu. Other
// ids outside [0, V) (cpu throws naming them; here that would need a copy
// back and a synchronize): forward writes the row as NaN, so the loss
// becomes NaN; backward adds nothing for them. Nothing is read or written
// out of bounds.
#include <cstdint>

#include <math_constants.h>

#include "kernels_rows.h"

namespace headroom::cuda {

namespace {

using rows::grid_for;
using rows::store;
using rows::widen;

constexpr int kRowThreads = 256;
// Sorted in shared memory by one block: 2048 int64 keys are 16 KiB, one
// comparator per thread per step.
constexpr int kChunk = 2048;
constexpr int kSortThreads = kChunk / 2;
constexpr int64_t kPaddingKey = INT64_MAX;  // above every id * 2^32 + index
// Runs per block row of the backward grid; the grid strides over the rest.
constexpr int64_t kRunBlocks = 2048;

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    gather_kernel(const T* table, int64_t vocab, int64_t width, const int32_t* ids, int64_t tokens,
                  T* out) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int32_t id = ids[t];
    T* row = out + t * width;
    if (id < 0 || id >= vocab) {
      const float fill = id == -1 ? 0.0f : CUDART_NAN_F;  // another rank's / out of range
      for (int64_t c = threadIdx.x; c < width; c += kRowThreads)
        store(row + c, fill);
      continue;
    }
    const T* source = table + static_cast<int64_t>(id) * width;
    for (int64_t c = threadIdx.x; c < width; c += kRowThreads)
      row[c] = source[c];
  }
}

// (id, index) as one int64 that orders as the pair does: index < 2^31.
__device__ __forceinline__ int64_t key_of(const int32_t* ids, int32_t index) {
  return static_cast<int64_t>(ids[index]) * 4294967296LL + index;
}
__device__ __forceinline__ int32_t index_of(int64_t key) {
  return static_cast<int32_t>(static_cast<uint64_t>(key) & 0xffffffffu);
}

// One step of the network on a chunk in shared memory, one comparator per
// thread: pairs at distance h inside blocks of 2h, or, when `mirrored` (a
// merge stage's first step), position r against 2h - 1 - r of each block,
// which merges two ascending halves without a descending one.
__device__ __forceinline__ void chunk_step(int64_t* keys, int h, bool mirrored) {
  const int q = threadIdx.x;
  const int base = (q / h) * 2 * h, r = q % h;
  const int lo = base + r, hi = mirrored ? base + 2 * h - 1 - r : lo + h;
  const int64_t a = keys[lo], b = keys[hi];
  if (a > b) {
    keys[lo] = b;
    keys[hi] = a;
  }
  __syncthreads();
}

// `first`: order = 0..T-1 sorted within each chunk (the whole sort's first
// log2(kChunk) stages). Otherwise: a merge stage's steps of distance
// kChunk / 2 down to 1 on order as it stands.
__global__ void __launch_bounds__(kSortThreads)
    chunk_sort_kernel(const int32_t* ids, int32_t* order, int64_t tokens, bool first) {
  __shared__ int64_t keys[kChunk];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kChunk;
  for (int i = threadIdx.x; i < kChunk; i += kSortThreads) {
    const int64_t g = base + i;
    keys[i] = g >= tokens ? kPaddingKey : key_of(ids, first ? static_cast<int32_t>(g) : order[g]);
  }
  __syncthreads();
  if (first) {
    for (int k = 2; k <= kChunk; k <<= 1) {
      chunk_step(keys, k / 2, true);
      for (int h = k / 4; h >= 1; h >>= 1)
        chunk_step(keys, h, false);
    }
  } else {
    for (int h = kChunk / 2; h >= 1; h >>= 1)
      chunk_step(keys, h, false);
  }
  for (int i = threadIdx.x; i < kChunk; i += kSortThreads) {
    const int64_t g = base + i;
    if (g < tokens) order[g] = index_of(keys[i]);
  }
}

// One step of distance h >= kChunk over all of order (as chunk_step);
// `pairs` is half the padded length.
__global__ void global_step_kernel(const int32_t* ids, int32_t* order, int64_t tokens,
                                   int64_t pairs, int64_t h, bool mirrored) {
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < pairs;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (q / h) * 2 * h, r = q % h;
    const int64_t lo = base + r, hi = mirrored ? base + 2 * h - 1 - r : lo + h;
    if (hi >= tokens) continue;  // +infinity there: never swapped
    const int32_t a = order[lo], b = order[hi];
    if (key_of(ids, a) > key_of(ids, b)) {
      order[lo] = b;
      order[hi] = a;
    }
  }
}

// Block (x, y): the runs starting at positions k = x, x + gridDim.x, ... of
// the sorted order, columns y * blockDim + thread, strided by gridDim.y.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    scatter_runs_kernel(const T* d_out, const int32_t* ids, const int32_t* order, int64_t tokens,
                        int64_t width, T* d_table, int64_t vocab) {
  for (int64_t k = blockIdx.x; k < tokens; k += gridDim.x) {
    const int32_t id = ids[order[k]];
    if (k > 0 && ids[order[k - 1]] == id) continue;  // inside a run, not its start
    if (id < 0 || id >= vocab) continue;
    int64_t end = k + 1;
    while (end < tokens && ids[order[end]] == id)
      ++end;
    T* target = d_table + static_cast<int64_t>(id) * width;
    for (int64_t c = blockIdx.y * static_cast<int64_t>(kRowThreads) + threadIdx.x; c < width;
         c += static_cast<int64_t>(gridDim.y) * kRowThreads) {
      float sum = 0;
      for (int64_t e = k; e < end; ++e)
        sum += widen(d_out[static_cast<int64_t>(order[e]) * width + c]);
      store(target + c, widen(target[c]) + sum);
    }
  }
}

template <typename T>
cudaError_t embedding_forward(const T* table, int64_t vocab, int64_t width, const int32_t* ids,
                              int64_t tokens, T* out, cudaStream_t stream) {
  if (tokens == 0 || width == 0) return cudaSuccess;
  gather_kernel<<<grid_for(tokens), kRowThreads, 0, stream>>>(table, vocab, width, ids, tokens,
                                                              out);
  return cudaGetLastError();
}

// order = 0..tokens-1 sorted by (ids[t], t).
cudaError_t sort_by_id(const int32_t* ids, int64_t tokens, int32_t* order, cudaStream_t stream) {
  const auto chunks = static_cast<unsigned>((tokens + kChunk - 1) / kChunk);
  chunk_sort_kernel<<<chunks, kSortThreads, 0, stream>>>(ids, order, tokens, true);
  int64_t padded = kChunk;
  while (padded < tokens)
    padded *= 2;
  const int64_t pairs = padded / 2;
  for (int64_t k = 2 * kChunk; k <= padded; k *= 2) {
    global_step_kernel<<<grid_for(pairs, 256), 256, 0, stream>>>(ids, order, tokens, pairs, k / 2,
                                                                 true);
    for (int64_t h = k / 4; h >= kChunk; h /= 2)
      global_step_kernel<<<grid_for(pairs, 256), 256, 0, stream>>>(ids, order, tokens, pairs, h,
                                                                   false);
    chunk_sort_kernel<<<chunks, kSortThreads, 0, stream>>>(ids, order, tokens, false);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t embedding_backward(const T* d_out, const int32_t* ids, int64_t tokens, int64_t width,
                               T* d_table, int64_t vocab, int32_t* order, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  const cudaError_t sorted = sort_by_id(ids, tokens, order, stream);
  if (sorted != cudaSuccess || width == 0) return sorted;
  const dim3 grid(static_cast<unsigned>(tokens < kRunBlocks ? tokens : kRunBlocks),
                  static_cast<unsigned>(grid_for(width, kRowThreads)));
  scatter_runs_kernel<<<grid, kRowThreads, 0, stream>>>(d_out, ids, order, tokens, width, d_table,
                                                        vocab);
  return cudaGetLastError();
}

}  // namespace

cudaError_t embedding_forward_f32(const float* table, int64_t vocab, int64_t width,
                                  const int32_t* ids, int64_t tokens, float* out,
                                  cudaStream_t stream) {
  return embedding_forward(table, vocab, width, ids, tokens, out, stream);
}

cudaError_t embedding_forward_bf16(const uint16_t* table, int64_t vocab, int64_t width,
                                   const int32_t* ids, int64_t tokens, uint16_t* out,
                                   cudaStream_t stream) {
  return embedding_forward(reinterpret_cast<const __nv_bfloat16*>(table), vocab, width, ids, tokens,
                           reinterpret_cast<__nv_bfloat16*>(out), stream);
}

cudaError_t embedding_forward_f16(const uint16_t* table, int64_t vocab, int64_t width,
                                  const int32_t* ids, int64_t tokens, uint16_t* out,
                                  cudaStream_t stream) {
  return embedding_forward(reinterpret_cast<const __half*>(table), vocab, width, ids, tokens,
                           reinterpret_cast<__half*>(out), stream);
}

cudaError_t embedding_backward_f32(const float* d_out, const int32_t* ids, int64_t tokens,
                                   int64_t width, float* d_table, int64_t vocab, int32_t* order,
                                   cudaStream_t stream) {
  return embedding_backward(d_out, ids, tokens, width, d_table, vocab, order, stream);
}

cudaError_t embedding_backward_bf16(const uint16_t* d_out, const int32_t* ids, int64_t tokens,
                                    int64_t width, uint16_t* d_table, int64_t vocab, int32_t* order,
                                    cudaStream_t stream) {
  return embedding_backward(reinterpret_cast<const __nv_bfloat16*>(d_out), ids, tokens, width,
                            reinterpret_cast<__nv_bfloat16*>(d_table), vocab, order, stream);
}

cudaError_t embedding_backward_f16(const uint16_t* d_out, const int32_t* ids, int64_t tokens,
                                   int64_t width, uint16_t* d_table, int64_t vocab, int32_t* order,
                                   cudaStream_t stream) {
  return embedding_backward(reinterpret_cast<const __half*>(d_out), ids, tokens, width,
                            reinterpret_cast<__half*>(d_table), vocab, order, stream);
}

}  // namespace headroom::cuda
