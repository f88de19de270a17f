// The dense_additive attention stages on cuda (kernels.h; formulas and the
// reference in cpu/dense_attention.cc). With P = probs, dP = d_probs, dS =
// d_scores and q', k' the front's sqrt(scale)-scaled query and key:
//   scores = q' k'^T + mask            P = safe_softmax(scores)
//   out = P v
//   dP = d_out v^T                     dv = P^T d_out
//   dS = P * (dP - rowsum(dP * P))     dq' = dS k',  dk' = dS^T q'
// The products are cuBLASLt's strided batched matmuls over the B*H (row,
// head) pairs (cublaslt_matmul.h: fp32 operands in full fp32, no TF32, one
// algorithm per shape so the same bits every run); the mask, the head copies
// and both softmax stages are cuda/dense_attention.cu's kernels. The mask is
// added by its own kernel after q' k'^T, as the cpu adds it after the dot.
// GQA needs no per-group product: the front repeats k and v to H heads
// (repeat_kv) before any product, so every product pairs head h with head h.
//
// Numerics: fp32 throughout; mask and the head copies match the cpu bit for
// bit; the products and the softmax rows sum in cuBLASLt's and a block
// tree's order rather than the cpu's left-to-right loop (rounding-level
// differences, deterministic run to run).
// Allocates: nothing (the front allocated every stage's tensors; the products
// use the backend's cuBLASLt workspace, or none before the first gemm).
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_attention.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

// A per-head tensor's layout, as cpu/dense_attention.cc's layout_of reads
// it: 4-D is head-major (B, n, S, D), 2-D token-major (T, n*D).
cuda::DenseHeads heads_of(const Tensor& x, const DenseAttentionDims& d) {
  if (x.dim() == 4) return {x.size(1), false};
  return {x.size(1) / d.head_dim, true};
}

// The mask's hidden value, as the cpu writes it: the dtype's lowest finite
// value (bf16's is 0xFF7F: -FLT_MAX would round to -inf; fp16's -65504).
float lowest_finite(DType dtype) {
  if (dtype == DType::kBF16) return std::bit_cast<float>(0xFF7F0000u);
  if (dtype == DType::kF16) return -65504.0f;
  return std::numeric_limits<float>::lowest();
}

// One per-head fp32 operand (H heads) of a product, as its (row, head)
// matrices lie: S x D with row stride ld, head h of row b at b * row_stride
// + h * head_stride. Head-major: ld D, heads S*D apart, rows H*S*D apart, so
// one batch of B*H covers it. Token-major: ld H*D, heads D apart, rows S*H*D
// apart: no single batch stride, so one call per row.
struct HeadsOperand {
  const float* data;
  int64_t ld, head_stride, row_stride;
  bool single_batch;
};

HeadsOperand operand_of(const Tensor& x, const DenseAttentionDims& d) {
  const int64_t S = d.seq, H = d.heads, D = d.head_dim;
  if (x.dim() == 4) return {x.data<float>(), D, S * D, H * S * D, true};
  return {x.data<float>(), H * D, D, S * H * D, false};
}

}  // namespace

void CudaKernels::dense_attention_mask(const std::vector<int32_t>& cu_seqlens,
                                       const AttentionParams& params,
                                       const DenseAttentionDims& dims, Tensor& mask) {
  if (mask.numel() == 0) return;
  const cuda::FloatType type = float_type_of("dense_attention_mask", mask.dtype());
  HR_CUDA_CHECK(cuda::dense_attention_mask(
      cu_seqlens.data(), static_cast<int64_t>(cu_seqlens.size()) - 1,
      static_cast<uint8_t>(params.mask), params.window, params.mask_block, dims.seq,
      lowest_finite(mask.dtype()), mask.raw(), type, stream()));
}

void CudaKernels::dense_attention_heads(const Tensor& src, Tensor& dst,
                                        const DenseAttentionDims& dims, float scale) {
  if (dst.numel() == 0) return;
  const cuda::FloatType from = float_type_of("dense_attention_heads", src.dtype());
  const cuda::FloatType to = float_type_of("dense_attention_heads", dst.dtype());
  HR_CUDA_CHECK(cuda::dense_attention_heads(src.raw(), from, heads_of(src, dims), dst.raw(), to,
                                            heads_of(dst, dims), dims.rows, dims.seq, dims.head_dim,
                                            scale, stream()));
}

// The products below: C = op(A) op(B) in fp32, beta = 0. k >= 1 always (S
// and D are at least 1: the front's checks), which cuBLASLt needs.
namespace {

struct Workspace {
  void* data = nullptr;
  uint64_t bytes = 0;
};

Workspace workspace_of(const Tensor* workspace) {
  if (workspace == nullptr) return {};
  return {workspace->raw(), workspace->nbytes()};
}

// C (B, H, S, n) head-major = op(A) op(V) over the (row, head) pairs, A a
// head-major fp32 (B, H, S, S) or (B, H, S, D) tensor and V a per-head
// operand of either layout, op(V) = V (transpose_v false: k = S, n = D) or
// V^T (k = D, n = S). A token-major V takes one call per row b: its pointers
// then start at batch b*H of the same strides, so they are aligned as well
// as cuBLASLt's own batch pointers are.
void product_with_heads(CublasLtMatmuls& matmuls, Workspace ws, const DenseAttentionDims& d,
                        const float* a, bool transpose_a, const HeadsOperand& v, bool transpose_v,
                        float* c) {
  const int64_t S = d.seq, D = d.head_dim, H = d.heads;
  MatmulShape s;
  s.m = S;
  s.k = transpose_v ? D : S;
  s.n = transpose_v ? S : D;
  s.transpose_a = transpose_a;
  s.transpose_b = transpose_v;
  s.ab = DType::kF32, s.c = DType::kF32;
  s.lda = transpose_a ? s.m : s.k;  // A is stored m x k, or k x m transposed: S x S or S x D
  s.stride_a = s.m * s.k;
  s.ldb = v.ld;
  s.stride_b = v.head_stride;
  s.ldc = s.n;
  s.stride_c = s.m * s.n;
  if (v.single_batch) {
    s.batch = d.rows * H;
    matmuls.run(s, a, v.data, c, 1.0f, 0.0f, ws.data, ws.bytes);
    return;
  }
  s.batch = H;
  for (int64_t b = 0; b < d.rows; ++b)
    matmuls.run(s, a + b * H * s.stride_a, v.data + b * v.row_stride, c + b * H * s.stride_c, 1.0f,
                0.0f, ws.data, ws.bytes);
}

}  // namespace

void CudaKernels::dense_attention_scores(const Tensor& query, const Tensor& key, const Tensor& mask,
                                         const DenseAttentionDims& d, Tensor& scores) {
  if (scores.numel() == 0) return;
  const cuda::FloatType mask_type = float_type_of("dense_attention_scores", mask.dtype());
  // scores = q' k'^T, then + mask: the cpu's dot + mask, one rounding each.
  product_with_heads(matmuls_, workspace_of(workspace_), d, query.data<float>(), false,
                     operand_of(key, d), true, scores.data<float>());
  HR_CUDA_CHECK(cuda::dense_attention_add_mask(scores.data<float>(), mask.raw(), mask_type, d.rows,
                                               d.heads, d.seq, stream()));
}

void CudaKernels::dense_attention_softmax(const Tensor& scores, const DenseAttentionDims& d,
                                          Tensor& softmax, Tensor& neg_inf, Tensor& neg_inf_rows,
                                          Tensor& probs) {
  HR_CUDA_CHECK(cuda::dense_attention_softmax(scores.data<float>(), softmax.data<float>(),
                                              neg_inf.data<uint8_t>(), neg_inf_rows.data<uint8_t>(),
                                              probs.data<float>(), d.rows * d.heads * d.seq, d.seq,
                                              stream()));
}

void CudaKernels::dense_attention_context(const Tensor& probs, const Tensor& value,
                                          const DenseAttentionDims& d, Tensor& out) {
  if (out.numel() == 0) return;
  product_with_heads(matmuls_, workspace_of(workspace_), d, probs.data<float>(), false,
                     operand_of(value, d), false, out.data<float>());
}

void CudaKernels::dense_attention_context_backward(const Tensor& d_out, const Tensor& probs,
                                                   const Tensor& value, const DenseAttentionDims& d,
                                                   Tensor& d_probs, Tensor& d_value) {
  if (d_probs.numel() == 0) return;
  const Workspace ws = workspace_of(workspace_);
  // dP = d_out v^T, v in either layout.
  product_with_heads(matmuls_, ws, d, d_out.data<float>(), false, operand_of(value, d), true,
                     d_probs.data<float>());
  // dv = P^T d_out, d_out (B, H, S, D) head-major.
  product_with_heads(matmuls_, ws, d, probs.data<float>(), true, operand_of(d_out, d), false,
                     d_value.data<float>());
}

void CudaKernels::dense_attention_softmax_backward(const Tensor& d_probs, const Tensor& probs,
                                                   const DenseAttentionDims& d, Tensor& d_scores) {
  HR_CUDA_CHECK(cuda::dense_attention_softmax_backward(d_probs.data<float>(), probs.data<float>(),
                                                       d_scores.data<float>(),
                                                       d.rows * d.heads * d.seq, d.seq, stream()));
}

void CudaKernels::dense_attention_scores_backward(const Tensor& d_scores, const Tensor& query,
                                                  const Tensor& key, const DenseAttentionDims& d,
                                                  Tensor& d_query, Tensor& d_key) {
  if (d_query.numel() == 0) return;
  const Workspace ws = workspace_of(workspace_);
  // dq' = dS k', dk' = dS^T q', all head-major.
  product_with_heads(matmuls_, ws, d, d_scores.data<float>(), false, operand_of(key, d), false,
                     d_query.data<float>());
  product_with_heads(matmuls_, ws, d, d_scores.data<float>(), true, operand_of(query, d), false,
                     d_key.data<float>());
}

}  // namespace headroom
