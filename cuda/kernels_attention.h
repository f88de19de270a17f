// Entry points of the dense_additive attention kernels (cuda/dense_attention.cu):
// the elementwise and row-wise stages around the cuBLASLt products that
// src/backend/cuda/dense_attention.cc issues. Every function launches on
// `stream` and returns the launch status; none synchronizes. Pointers are
// device pointers unless a comment says host. bf16 and fp16 are raw 16-bit
// storage; math is fp32, one rounding per stored element. B = rows, S = seq,
// H = heads, D = head_dim; "per-head" tensors are (B, n, S, D) head-major or
// (B*S, n*D) token-major.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "float_type.h"  // FloatType: the storage dtype of a floating operand

namespace headroom::cuda {

// A per-head tensor's layout: n heads, head-major (B, n, S, D) or token-major.
struct DenseHeads {
  int64_t heads = 0;
  bool token_major = false;
};

// mask (B, 1, S, S) = 0 where key row_start(i) + j is visible to query i
// (attention_mask.h's visible_keys_in_document), `hidden` elsewhere, for the
// T = cu[documents] tokens. cu (documents + 1 offsets) is host memory.
cudaError_t dense_attention_mask(const int32_t* cu, int64_t documents, uint8_t mask_kind,
                                 int64_t window, int64_t mask_block, int64_t seq, float hidden,
                                 void* mask, FloatType mask_type, cudaStream_t stream);

// dst = scale * src per head, in dst's layout and dtype: dst head h reads
// src head h / (n_dst / n_src) when n_dst >= n_src, and sums src heads
// h * g .. h * g + g - 1 in order when g = n_src / n_dst > 1. src != dst.
cudaError_t dense_attention_heads(const void* src, FloatType src_type, DenseHeads src_layout,
                                  void* dst, FloatType dst_type, DenseHeads dst_layout,
                                  int64_t rows, int64_t seq, int64_t head_dim, float scale,
                                  cudaStream_t stream);

// scores (B, H, S, S) fp32 += mask (B, 1, S, S), broadcast over H.
cudaError_t dense_attention_add_mask(float* scores, const void* mask, FloatType mask_type,
                                     int64_t rows, int64_t heads, int64_t seq, cudaStream_t stream);

// _safe_softmax over each of `rows` fp32 rows of S: softmax, neg_inf =
// (x == -inf), neg_inf_rows[r] = all of row r's neg_inf, probs = neg_inf_rows
// ? 0 : softmax. Outputs distinct from scores.
cudaError_t dense_attention_softmax(const float* scores, float* softmax, uint8_t* neg_inf,
                                    uint8_t* neg_inf_rows, float* probs, int64_t rows, int64_t seq,
                                    cudaStream_t stream);

// d_scores = probs * (d_probs - rowsum(d_probs * probs)) over `rows` fp32
// rows of S. d_scores distinct from both inputs.
cudaError_t dense_attention_softmax_backward(const float* d_probs, const float* probs,
                                             float* d_scores, int64_t rows, int64_t seq,
                                             cudaStream_t stream);

}  // namespace headroom::cuda
