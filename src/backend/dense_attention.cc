// The front of the dense_additive attention ops (backend.h): the allocations
// of PyTorch's SDPA math path, in its order, around the device's kernels.
//
// Modelled on PyTorch 2.5+ (aten/src/ATen/native/transformers/attention.cpp:
// _scaled_dot_product_attention_math, _safe_softmax; the autograd formulas of
// matmul, _safe_softmax and _to_copy) as Hugging Face transformers'
// sdpa_attention_forward calls it with a 4-D mask: repeat_kv first (HF passes
// enable_gqa only without a mask), then the math path, then
// transpose(1, 2).contiguous(). Each tensor below is named after the
// variable it stands for; docs/backend.md (dense_attention) lists them
// Not modelled: the layout copies at::matmul makes of strided (B, n, S, D)
// views (each H*S*D*4 bytes, under 1/S of one score tensor), and PyTorch's
// order between the q, k and v branches at the end of backward.
#include <cmath>
#include <string>

#include "backend/backend.h"
#include "backend/dense_attention_checks.h"
#include "backend/kernels.h"

namespace headroom {

namespace {

// One of the op's tensors: tag "<prefix>.<name>".
Tensor named_tensor(const Backend& backend, std::string_view prefix, const Shape& shape,
                    DType dtype, std::string_view name, Category category) {
  return backend.empty(shape, dtype, category, std::string(prefix) + "." + std::string(name));
}

}  // namespace

Tensor Backend::dense_attention_mask(const std::vector<int32_t>& cu_seqlens, int64_t rows,
                                     const AttentionParams& params, DType dtype,
                                     std::string_view tag) {
  const DenseAttentionDims d = check_dense_attention_mask(kind_, cu_seqlens, rows, params, dtype);
  require(Op::kDenseAttentionMask);
  Tensor mask = empty({d.rows, 1, d.seq, d.seq}, dtype, Category::kAttention, tag);
  if (kernels_) kernels_->dense_attention_mask(cu_seqlens, params, d, mask);
  return mask;
}

Tensor Backend::dense_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& mask, const AttentionParams& params,
                                        std::string_view tag_prefix, DenseAttentionSaved& saved) {
  const DenseAttentionDims d = check_dense_attention_forward(kind_, q, k, v, mask, params);
  require(Op::kDenseAttentionForward);
  const DType dt = q.dtype();
  const bool upcast = dt != DType::kF32;
  const int64_t H = d.heads;
  // The math path scales q and k by sqrt(scale) each "for stability".
  const float root = std::sqrt(params.scale);
  auto make = [&](const Shape& shape, DType dtype, std::string_view name,
                  Category category = Category::kAttention) {
    return named_tensor(*this, tag_prefix, shape, dtype, name, category);
  };
  auto heads = [&](const Tensor& src, Tensor& dst, float scale) {
    if (kernels_) kernels_->dense_attention_heads(src, dst, d, scale);
  };

  // HF's repeat_kv: key_states, value_states expanded to H heads (a copy).
  Tensor key_states = k, value_states = v;
  if (d.group() > 1) {
    key_states = make(d.per_head(H), dt, "k_repeated");
    value_states = make(d.per_head(H), dt, "v_repeated");
    heads(k, key_states, 1.0f);
    heads(v, value_states, 1.0f);
  }
  // query_acc, key_acc, value_acc: a bf16 q, k, v is upcast to fp32.
  Tensor query_acc = q, key_acc = key_states, value_acc = value_states;
  if (upcast) {
    query_acc = make(d.per_head(H), DType::kF32, "q_fp32");
    key_acc = make(d.per_head(H), DType::kF32, "k_fp32");
    value_acc = make(d.per_head(H), DType::kF32, "v_fp32");
    heads(q, query_acc, 1.0f);
    heads(key_states, key_acc, 1.0f);
    heads(value_states, value_acc, 1.0f);
  }
  // query = query_acc * sqrt(scale); key_acc.transpose(-2, -1) * sqrt(scale):
  // both saved by the first matmul, as value_acc is by the second.
  saved.query = make(d.per_head(H), DType::kF32, "q_scaled");
  heads(query_acc, saved.query, root);
  saved.key = make(d.per_head(H), DType::kF32, "k_scaled");
  heads(key_acc, saved.key, root);
  saved.value = value_acc;

  // attn = matmul(query, key^T); attn.add_(attn_mask)
  Tensor scores = make(d.scores(), DType::kF32, "scores");
  if (kernels_) kernels_->dense_attention_scores(saved.query, saved.key, mask, d, scores);
  {
    // _safe_softmax: out = softmax(attn); masked = attn.eq(-inf); masked_rows
    // = all(masked, -1); where(masked_rows, 0, out) is the saved result.
    Tensor softmax = make(d.scores(), DType::kF32, "softmax");
    Tensor neg_inf = make(d.scores(), DType::kU8, "softmax.neg_inf");
    Tensor neg_inf_rows = make({d.rows, H, d.seq, 1}, DType::kU8, "softmax.neg_inf_rows");
    saved.probs = make(d.scores(), DType::kF32, "probs");
    if (kernels_)
      kernels_->dense_attention_softmax(scores, d, softmax, neg_inf, neg_inf_rows, saved.probs);
  }
  scores = Tensor();  // attn = _safe_softmax(attn): the scores go

  // matmul(attn, value_acc).to(origin_dtype)
  Tensor context = make(d.per_head(H), DType::kF32, upcast ? "context_fp32" : "context");
  if (kernels_) kernels_->dense_attention_context(saved.probs, saved.value, d, context);
  if (upcast) {
    Tensor narrow = make(d.per_head(H), dt, "context");
    heads(context, narrow, 1.0f);
    context = narrow;
  }
  Tensor returned;
  if (upcast) {
    // attn.to(origin_dtype): the math path's second result, which
    // scaled_dot_product_attention drops on return.
    returned = make(d.scores(), dt, "probs_returned");
    if (kernels_) kernels_->cast(saved.probs, returned);
  }
  query_acc = Tensor(), key_acc = Tensor();  // the math path returns
  returned = Tensor();

  // HF: attn_output.transpose(1, 2).contiguous(), o_proj's input.
  Tensor out = make({d.tokens(), H * d.head_dim}, dt, "out", Category::kActivation);
  heads(context, out, 1.0f);
  return out;
}

DenseAttentionGrads Backend::dense_attention_backward(const Tensor& d_out,
                                                      DenseAttentionSaved& saved,
                                                      const AttentionParams& params,
                                                      std::string_view tag_prefix) {
  const DenseAttentionDims d = check_dense_attention_backward(kind_, d_out, saved, params);
  require(Op::kDenseAttentionBackward);
  const DType dt = d_out.dtype();
  const bool upcast = dt != DType::kF32;
  const int64_t H = d.heads;
  const float root = std::sqrt(params.scale);
  auto make = [&](const Shape& shape, DType dtype, std::string_view name,
                  Category category = Category::kAttention) {
    return named_tensor(*this, tag_prefix, shape, dtype, name, category);
  };
  auto heads = [&](const Tensor& src, Tensor& dst, float scale) {
    if (kernels_) kernels_->dense_attention_heads(src, dst, d, scale);
  };

  // The output's gradient as the second matmul's backward reads it: upcast
  // (_to_copy's backward) and in the (B, H, S, D) layout.
  Tensor d_context = make(d.per_head(H), DType::kF32, "context.grad");
  heads(d_out, d_context, 1.0f);
  // matmul(attn, value_acc): grad_attn, grad_value; then value_acc is released.
  Tensor d_probs = make(d.scores(), DType::kF32, "probs.grad");
  Tensor d_value = make(d.per_head(H), DType::kF32, "v_fp32.grad");
  if (kernels_)
    kernels_->dense_attention_context_backward(d_context, saved.probs, saved.value, d, d_probs,
                                               d_value);
  d_context = Tensor(), saved.value = Tensor();
  // _safe_softmax's backward: _softmax_backward_data(grad, result).
  Tensor d_scores = make(d.scores(), DType::kF32, "scores.grad");
  if (kernels_) kernels_->dense_attention_softmax_backward(d_probs, saved.probs, d, d_scores);
  d_probs = Tensor(), saved.probs = Tensor();
  // add_(attn_mask) passes the gradient through; matmul(query, key^T):
  Tensor d_query = make(d.per_head(H), DType::kF32, "q_scaled.grad");
  Tensor d_key = make(d.per_head(H), DType::kF32, "k_scaled.grad");
  if (kernels_)
    kernels_->dense_attention_scores_backward(d_scores, saved.query, saved.key, d, d_query, d_key);
  d_scores = Tensor(), saved.query = Tensor(), saved.key = Tensor();
  // The two multiplications by sqrt(scale), key's first (autograd runs the
  // node made later in forward first).
  Tensor d_key_acc = make(d.per_head(H), DType::kF32, "k_fp32.grad");
  heads(d_key, d_key_acc, root);
  d_key = Tensor();
  Tensor d_query_acc = make(d.per_head(H), DType::kF32, "q_fp32.grad");
  heads(d_query, d_query_acc, root);
  d_query = Tensor();

  // Per input: the upcast's backward (back to the model dtype), repeat_kv's
  // (a sum over each group of H / KV heads), then the token-major layout
  // that the projections' backward reads.
  auto finish = [&](Tensor& acc, int64_t n, std::string_view name) {
    Tensor x = acc;
    if (upcast) {
      x = make(d.per_head(H), dt, std::string(name) + "_heads.grad");
      heads(acc, x, 1.0f);
      acc = Tensor();
    }
    if (n < H) {
      Tensor summed = make(d.per_head(n), dt, std::string(name) + "_repeated.grad");
      heads(x, summed, 1.0f);
      x = summed;
    }
    Tensor result =
        make({d.tokens(), n * d.head_dim}, dt, std::string(name) + ".grad", Category::kActivation);
    heads(x, result, 1.0f);
    acc = Tensor();
    return result;
  };
  DenseAttentionGrads grads;
  grads.dv = finish(d_value, d.kv_heads, "v");
  grads.dk = finish(d_key_acc, d.kv_heads, "k");
  grads.dq = finish(d_query_acc, H, "q");
  return grads;
}

}  // namespace headroom
