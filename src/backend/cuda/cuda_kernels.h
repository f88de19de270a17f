// The cuda kernel table: every op of the front (block-sparse flash attention
// for head_dim 64 and 128; require_cuda_run refuses other head_dims before a
// run allocates). Each op is defined in its own file, src/backend/cuda/
// <op>.cc, which checks nothing the front checked and launches the kernels of
// cuda/<op>.cu on the context's one stream. Nothing here synchronizes except
// the host transfers (copy_to_host must hand back finished values) and the
// ops whose results the host reads (sum_squares' callers read through
// copy_to_host too).
//
// Numerics follow the cpu table op for op (cpu/<op>.cc): fp32 math, bf16 and
// fp16 widened on load and rounded once on store, and every reduction summed
// in a fixed order (tree per block, blocks in index order; no atomics), so a
// run gives the same bits every time.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cublaslt_matmul.h"
#include "backend/cuda/cuda_context.h"
#include "backend/kernels.h"

namespace headroom {

class CudaKernels final : public Kernels {
 public:
  CudaKernels();
  BackendKind kind() const override { return BackendKind::kCuda; }
  bool supports(Op op) const override;

  const CudaContext& context() const { return context_; }
  cudaStream_t stream() const { return context_.stream(); }
  void* device_stream() const override { return context_.stream(); }

  void fill(Tensor& x, float value) override;
  void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void cast(const Tensor& x, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) override;
  void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
            float alpha, float beta, const GemmDims& dims, GemmScratch& scratch) override;
  void gemm_bias(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
                 const Tensor& bias, const GemmDims& dims, GemmScratch& scratch) override;

  void copy_from_host(const void* src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void scale(Tensor& x, float alpha) override;
  void sum_squares(const Tensor& x, Tensor& out) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table,
                          Tensor& order) override;
  void rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                       Tensor& rstd) override;
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                        Tensor& dx, Tensor& dw) override;
  void rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) override;
  void rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim, float theta) override;
  void bias_forward(Tensor& x, const Tensor& bias) override;
  void bias_backward(const Tensor& dy, Tensor& d_bias) override;
  void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up, Tensor& d_gate,
                       Tensor& d_up) override;
  // Block-sparse flash attention (flash_attention.cc).
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                         const AttentionDims& dims, Tensor& out, Tensor& lse) override;
  void attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& out, const Tensor& lse,
                          const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                          const AttentionDims& dims, AttentionBackwardScratch& scratch, Tensor& dq,
                          Tensor& dk, Tensor& dv) override;
  void dense_attention_mask(const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                            const DenseAttentionDims& dims, Tensor& mask) override;
  void dense_attention_heads(const Tensor& src, Tensor& dst, const DenseAttentionDims& dims,
                             float scale) override;
  void dense_attention_scores(const Tensor& query, const Tensor& key, const Tensor& mask,
                              const DenseAttentionDims& dims, Tensor& scores) override;
  void dense_attention_softmax(const Tensor& scores, const DenseAttentionDims& dims,
                               Tensor& softmax, Tensor& neg_inf, Tensor& neg_inf_rows,
                               Tensor& probs) override;
  void dense_attention_context(const Tensor& probs, const Tensor& value,
                               const DenseAttentionDims& dims, Tensor& out) override;
  void dense_attention_context_backward(const Tensor& d_out, const Tensor& probs,
                                        const Tensor& value, const DenseAttentionDims& dims,
                                        Tensor& d_probs, Tensor& d_value) override;
  void dense_attention_softmax_backward(const Tensor& d_probs, const Tensor& probs,
                                        const DenseAttentionDims& dims, Tensor& d_scores) override;
  void dense_attention_scores_backward(const Tensor& d_scores, const Tensor& query,
                                       const Tensor& key, const DenseAttentionDims& dims,
                                       Tensor& d_query, Tensor& d_key) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                             Tensor& loss_sum) override;
  void cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                              float scale) override;
  void adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWParams& params) override;
  void adamw8bit_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                        Tensor& m_absmax, Tensor& v_absmax, const AdamWParams& params) override;
  void nf4_quantize(const Tensor& w, Tensor& scratch, Nf4Weight& q) override;
  void nf4_dequantize(const Nf4Weight& q, Tensor& scratch, Tensor& out) override;

  // The products of gemm and of the dense attention stages.
  CublasLtMatmuls& matmuls() { return matmuls_; }
  // The backend's cuBLASLt workspace, once its first gemm allocated it
  // (gemm_workspace.h: held for the backend's life); null before. The dense
  // attention stages' batched products use it too, so they allocate nothing
  // the meta plan does not show.
  const Tensor* cublaslt_workspace() const { return workspace_; }

 private:
  CudaContext context_;
  CublasLtMatmuls matmuls_;
  const Tensor* workspace_ = nullptr;
};

}  // namespace headroom
