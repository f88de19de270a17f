// A device's kernel table: the compute half of an op, called by the front
// (backend.h) after it has checked the operands and allocated every output
// and scratch tensor the op makes. A kernel therefore never allocates and
// never re-checks shapes; it may still check values only it can read (token
// ids in range, targets in range) and throws InternalError naming them.
//
// The contract of each op is on Backend's method of the same name; the
// extra arguments here are what the front prepared: checked dimensions and
// scratch. meta has no table: it is the front alone. A table that lacks an
// op (the cuda table grows op by op) says so in supports(); the front then
// refuses the call before allocating anything, and the inherited default
// below is never reached.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/attention_checks.h"
#include "backend/dense_attention_checks.h"
#include "backend/gemm_workspace.h"
#include "backend/nf4_weight.h"
#include "backend/op.h"
#include "backend/op_checks.h"
#include "tensor/tensor.h"

namespace headroom {

struct AttentionParams;
struct AdamWParams;

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual BackendKind kind() const = 0;
  virtual bool supports(Op op) const = 0;
  // The device stream every op is queued on (cuda); nullptr on the host.
  virtual void* device_stream() const { return nullptr; }

  virtual void fill(Tensor& x, float value) = 0;
  virtual void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) = 0;
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  // `out` is the front's new tensor of x's shape in the target dtype.
  virtual void cast(const Tensor& x, Tensor& out) = 0;
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) = 0;
  // `scratch` is the target's GemmWorkspace answer for this call.
  virtual void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
                    float alpha, float beta, const GemmDims& dims, GemmScratch& scratch) = 0;
  // C = op(A) op(B) + bias broadcast over C's rows. A table without a fused
  // epilogue runs it as the two passes gemm and bias_forward (what the cpu
  // does, so its bits are those of the two calls).
  virtual void gemm_bias(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                         Tensor& c, const Tensor& bias, const GemmDims& dims,
                         GemmScratch& scratch) {
    gemm(a, transpose_a, b, transpose_b, c, 1.0f, 0.0f, dims, scratch);
    bias_forward(c, bias);
  }

  virtual void copy_from_host(const void* src, Tensor& dst) = 0;
  virtual void copy_to_host(const Tensor& src, void* dst) = 0;
  virtual void scale(Tensor& x, float alpha) = 0;
  virtual void sum_squares(const Tensor& x, Tensor& out) = 0;

  virtual void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // `order` (T) int32: the front's scratch for the id sort.
  virtual void embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table,
                                  Tensor& order) = 0;
  virtual void rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                               Tensor& rstd) = 0;
  virtual void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                const Tensor& rstd, Tensor& dx, Tensor& dw) = 0;
  virtual void rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) = 0;
  virtual void rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim,
                             float theta) = 0;
  virtual void bias_forward(Tensor& x, const Tensor& bias) = 0;
  virtual void bias_backward(const Tensor& dy, Tensor& d_bias) = 0;
  virtual void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual void swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up,
                               Tensor& d_gate, Tensor& d_up) = 0;
  virtual void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::vector<int32_t>& cu_seqlens,
                                 const AttentionParams& params, const AttentionDims& dims,
                                 Tensor& out, Tensor& lse) = 0;
  virtual void attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out, const Tensor& lse,
                                  const std::vector<int32_t>& cu_seqlens,
                                  const AttentionParams& params, const AttentionDims& dims,
                                  AttentionBackwardScratch& scratch, Tensor& dq, Tensor& dk,
                                  Tensor& dv) = 0;
  // ---- dense_additive attention, in the stages the front allocates
  // between (backend/dense_attention.cc; formulas in cpu/dense_attention.cc).
  // A per-head tensor is (B, n, S, D) head-major, or (T, n*D) token-major
  // (the caller's q, k, v, d_out and the results). All fp32 unless noted.
  virtual void dense_attention_mask(const std::vector<int32_t>& cu_seqlens,
                                    const AttentionParams& params, const DenseAttentionDims& dims,
                                    Tensor& mask) = 0;
  // dst = scale * src, per head, converted to dst's layout and dtype (fp32
  // math, one rounding). n_dst = n_src copies; n_dst a multiple of n_src
  // repeats each source head n_dst / n_src times (HF's repeat_kv); n_src a
  // multiple of n_dst sums each group of n_src / n_dst heads (its backward).
  virtual void dense_attention_heads(const Tensor& src, Tensor& dst, const DenseAttentionDims& dims,
                                     float scale) = 0;
  // scores (B, H, S, S) = query key^T + mask (mask broadcast over H).
  virtual void dense_attention_scores(const Tensor& query, const Tensor& key, const Tensor& mask,
                                      const DenseAttentionDims& dims, Tensor& scores) = 0;
  // _safe_softmax over the last dim: softmax (B, H, S, S); neg_inf (B, H, S,
  // S) uint8 = (scores == -inf); neg_inf_rows (B, H, S, 1) uint8 = all of a
  // row's neg_inf; probs = neg_inf_rows ? 0 : softmax.
  virtual void dense_attention_softmax(const Tensor& scores, const DenseAttentionDims& dims,
                                       Tensor& softmax, Tensor& neg_inf, Tensor& neg_inf_rows,
                                       Tensor& probs) = 0;
  // out (B, H, S, D) = probs value.
  virtual void dense_attention_context(const Tensor& probs, const Tensor& value,
                                       const DenseAttentionDims& dims, Tensor& out) = 0;
  // d_probs = d_out value^T, d_value (B, H, S, D) = probs^T d_out.
  virtual void dense_attention_context_backward(const Tensor& d_out, const Tensor& probs,
                                                const Tensor& value, const DenseAttentionDims& dims,
                                                Tensor& d_probs, Tensor& d_value) = 0;
  // d_scores = probs * (d_probs - rowsum(d_probs * probs)) (softmax's backward).
  virtual void dense_attention_softmax_backward(const Tensor& d_probs, const Tensor& probs,
                                                const DenseAttentionDims& dims,
                                                Tensor& d_scores) = 0;
  // d_query = d_scores key, d_key = d_scores^T query, both (B, H, S, D).
  virtual void dense_attention_scores_backward(const Tensor& d_scores, const Tensor& query,
                                               const Tensor& key, const DenseAttentionDims& dims,
                                               Tensor& d_query, Tensor& d_key) = 0;
  virtual void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                     Tensor& loss_sum) = 0;
  virtual void cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                                      float scale) = 0;
  virtual void adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWParams& params) = 0;
  virtual void adamw8bit_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                                Tensor& v, Tensor& m_absmax, Tensor& v_absmax,
                                const AdamWParams& params) = 0;
  // scratch: undefined without double quantization; with it the fp32 absmax
  // (ceil(n / 64)) the kernel computes first, then quantizes into q.
  virtual void nf4_quantize(const Tensor& w, Tensor& scratch, Nf4Weight& q) = 0;
  // scratch: undefined without double quantization; with it the fp32 absmax
  // the kernel rebuilds first from q's double quantization.
  virtual void nf4_dequantize(const Nf4Weight& q, Tensor& scratch, Tensor& out) = 0;
};

}  // namespace headroom
