#include "backend/dense_attention_checks.h"

#include <algorithm>
#include <string>

#include "backend/attention_checks.h"
#include "backend/op_checks.h"

namespace headroom {

namespace {

std::string str(int64_t value) {
  return std::to_string(value);
}

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + str(shape[i]);
  return s + "]";
}

void check_shape_is(std::string_view op, const Tensor& x, std::string_view role,
                    const Shape& expected, std::string_view why) {
  if (x.shape() != expected)
    fail_op(op, describe_operand(role, x) + " must be " + shape_text(expected) + " (" +
                    std::string(why) + ")");
}

DenseAttentionDims dims_of(const AttentionParams& params, int64_t rows, int64_t seq) {
  DenseAttentionDims d;
  d.rows = rows;
  d.seq = seq;
  d.heads = params.heads;
  d.kv_heads = params.kv_heads;
  d.head_dim = params.head_dim;
  return d;
}

}  // namespace

DenseAttentionDims check_dense_attention_mask(BackendKind /*backend*/,
                                              const std::vector<int32_t>& cu_seqlens, int64_t rows,
                                              const AttentionParams& params, DType dtype) {
  constexpr std::string_view op = "dense_attention_mask";
  check_attention_params(op, params);
  if (!is_floating(dtype))
    fail_op(op, "the mask's dtype must be fp32, bf16 or fp16, got " + std::string(name_of(dtype)));
  if (cu_seqlens.empty()) fail_op(op, "cu_seqlens is empty");
  const int64_t tokens = cu_seqlens.back();
  check_cu_seqlens(op, cu_seqlens, tokens);
  if (rows < 1 || tokens < 1 || tokens % rows != 0)
    fail_op(op, "rows = " + str(rows) +
                    " must be >= 1 and divide the token count T = " + str(tokens) + " (T >= 1)");
  const int64_t seq = tokens / rows;
  if (rows > 1 && params.mask == AttentionMaskKind::kCausal)
    fail_op(op, "mask causal attends across documents, so it needs one row, not " + str(rows));
  for (int64_t r = 1; r < rows; ++r)
    if (!std::binary_search(cu_seqlens.begin(), cu_seqlens.end(), static_cast<int32_t>(r * seq)))
      fail_op(op, "row boundary " + str(r * seq) + " (row " + str(r) + " of " + str(rows) + ", " +
                      str(seq) + " tokens each) is not a document boundary of cu_seqlens");
  return dims_of(params, rows, seq);
}

DenseAttentionDims check_dense_attention_forward(BackendKind backend, const Tensor& q,
                                                 const Tensor& k, const Tensor& v,
                                                 const Tensor& mask,
                                                 const AttentionParams& params) {
  constexpr std::string_view op = "dense_attention_forward";
  check_attention_params(op, params);
  for (const auto& [x, role] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    check_operand(op, backend, *x, role);
    check_rank(op, *x, role, 2, "(T, n*D)");
  }
  check_operand(op, backend, mask, "mask");
  check_rank(op, mask, "mask", 4, "(B, 1, S, S)");
  check_floating(op, q, "q");
  check_same_dtype(op, q, "q", k, "k");
  check_same_dtype(op, q, "q", v, "v");
  check_same_dtype(op, q, "q", mask, "mask");
  const int64_t t = q.size(0), rows = mask.size(0), seq = mask.size(2);
  if (t < 1) fail_op(op, describe_operand("q", q) + " must hold at least one token");
  check_shape_is(op, mask, "mask", {rows, 1, seq, seq}, "(B, 1, S, S)");
  if (rows * seq != t)
    fail_op(op, describe_operand("mask", mask) + " covers B * S = " + str(rows * seq) +
                    " tokens, q holds " + str(t));
  const DenseAttentionDims d = dims_of(params, rows, seq);
  check_shape_is(op, q, "q", {t, d.heads * d.head_dim}, "T x H*D");
  check_shape_is(op, k, "k", {t, d.kv_heads * d.head_dim}, "T x KV*D");
  check_shape_is(op, v, "v", {t, d.kv_heads * d.head_dim}, "T x KV*D");
  return d;
}

DenseAttentionDims check_dense_attention_backward(BackendKind backend, const Tensor& d_out,
                                                  const DenseAttentionSaved& saved,
                                                  const AttentionParams& params) {
  constexpr std::string_view op = "dense_attention_backward";
  check_attention_params(op, params);
  check_operand(op, backend, d_out, "d_out");
  check_rank(op, d_out, "d_out", 2, "(T, H*D)");
  check_floating(op, d_out, "d_out");
  for (const auto& [x, role] : {std::pair{&saved.query, "saved.query"},
                                {&saved.key, "saved.key"},
                                {&saved.value, "saved.value"},
                                {&saved.probs, "saved.probs"}}) {
    check_operand(op, backend, *x, role);
    check_dtype(op, *x, role, DType::kF32);
  }
  check_rank(op, saved.probs, "saved.probs", 4, "(B, H, S, S)");
  const int64_t rows = saved.probs.size(0), seq = saved.probs.size(2);
  const DenseAttentionDims d = dims_of(params, rows, seq);
  check_shape_is(op, saved.probs, "saved.probs", d.scores(), "B x H x S x S");
  check_shape_is(op, saved.query, "saved.query", d.per_head(d.heads), "B x H x S x D");
  check_shape_is(op, saved.key, "saved.key", d.per_head(d.heads), "B x H x S x D");
  if (d_out.dtype() == DType::kF32 && d.group() == 1)
    check_shape_is(op, saved.value, "saved.value", {d.tokens(), d.kv_heads * d.head_dim},
                   "an fp32 model without GQA keeps v itself, T x KV*D");
  else
    check_shape_is(op, saved.value, "saved.value", d.per_head(d.heads), "B x H x S x D");
  check_shape_is(op, d_out, "d_out", {d.tokens(), d.heads * d.head_dim}, "T x H*D");
  return d;
}

}  // namespace headroom
