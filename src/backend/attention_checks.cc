#include "backend/attention_checks.h"

#include <cmath>
#include <string>

#include "backend/op_checks.h"

namespace headroom {

namespace {

std::string str(int64_t value) {
  return std::to_string(value);
}

// Defined, on this backend, 2-D (q, k, v, lse and their gradients all are).
void check_matrix(std::string_view op, BackendKind backend, const Tensor& x,
                  std::string_view role) {
  check_operand(op, backend, x, role);
  if (x.dim() != 2) fail_op(op, describe_operand(role, x) + " must be 2-D");
}

void check_shape(std::string_view op, const Tensor& x, std::string_view role, int64_t rows,
                 int64_t cols, std::string_view expected) {
  if (x.size(0) != rows || x.size(1) != cols)
    fail_op(op, describe_operand(role, x) + " must be [" + str(rows) + ", " + str(cols) + "] (" +
                    std::string(expected) + ")");
}

void check_dtype(std::string_view op, const Tensor& x, std::string_view role, DType dtype,
                 std::string_view why) {
  if (x.dtype() != dtype)
    fail_op(op, describe_operand(role, x) + " must be " + std::string(name_of(dtype)) + " (" +
                    std::string(why) + ")");
}

// Outputs are written while inputs are still read, tile by tile, by many
// threads: any overlap would make the result depend on the schedule.
struct Operand {
  const Tensor* tensor;
  std::string_view role;
};
void check_disjoint(std::string_view op, const Operand& x, const Operand& y) {
  headroom::check_disjoint(op, *x.tensor, x.role, *y.tensor, y.role);
}

void check_params(std::string_view op, const AttentionParams& p) {
  std::string values = " (heads " + str(p.heads) + ", kv_heads " + str(p.kv_heads) + ", head_dim " +
                       str(p.head_dim) + ", block_size " + str(p.block_size) + ", mask " +
                       std::string(name_of(p.mask)) + ", window " + str(p.window) +
                       ", mask_block " + str(p.mask_block) + ", scale " + value_string(p.scale) +
                       ")";
  if (p.heads < 1 || p.kv_heads < 1 || p.heads % p.kv_heads != 0)
    fail_op(op, "heads must be a positive multiple of kv_heads" + values);
  if (p.head_dim < 1 || p.head_dim > kMaxAttentionHeadDim)
    fail_op(op, "head_dim must be in [1, " + str(kMaxAttentionHeadDim) + "]" + values);
  if (p.block_size < 1 || p.block_size > kMaxAttentionBlockSize)
    fail_op(op, "block_size must be in [1, " + str(kMaxAttentionBlockSize) + "]" + values);
  // A parameter of another kind is a caller's slip, never a default.
  const bool sliding = p.mask == AttentionMaskKind::kSlidingWindow;
  const bool dflash = p.mask == AttentionMaskKind::kDflashBlock;
  if (sliding ? p.window < 1 : p.window != 0)
    fail_op(op, std::string(sliding ? "window must be >= 1 for mask sliding_window"
                                    : "window must be 0 unless mask is sliding_window") +
                    values);
  if (dflash ? p.mask_block < 1 : p.mask_block != 0)
    fail_op(op, std::string(dflash ? "mask_block must be >= 1 for mask dflash_block"
                                   : "mask_block must be 0 unless mask is dflash_block") +
                    values);
  if (!(std::isfinite(p.scale) && p.scale > 0))
    fail_op(op, "scale must be finite and > 0 (usually 1 / sqrt(head_dim))" + values);
}

// The rules forward and backward share: q, k, v, out, lse as forward sees them.
AttentionDims check_common(std::string_view op, BackendKind backend, const Tensor& q,
                           const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                           const AttentionParams& params, const Tensor& out, const Tensor& lse) {
  check_matrix(op, backend, q, "q");
  check_matrix(op, backend, k, "k");
  check_matrix(op, backend, v, "v");
  check_matrix(op, backend, out, "out");
  check_matrix(op, backend, lse, "lse");
  check_params(op, params);
  check_floating(op, q, "q");
  check_dtype(op, k, "k", q.dtype(), "q's dtype");
  check_dtype(op, v, "v", q.dtype(), "q's dtype");
  check_dtype(op, out, "out", q.dtype(), "q's dtype");
  check_dtype(op, lse, "lse", DType::kF32, "logsumexp is kept in fp32");

  AttentionDims d;
  d.tokens = q.size(0);
  d.heads = params.heads;
  d.kv_heads = params.kv_heads;
  d.head_dim = params.head_dim;
  d.block_size = params.block_size;
  d.mask = params.mask_spec();
  const int64_t t = d.tokens, hd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  const std::string hd_text = "T x H*D = " + str(t) + " x " + str(d.heads) + "*" + str(d.head_dim);
  const std::string kvd_text =
      "T x KV*D = " + str(t) + " x " + str(d.kv_heads) + "*" + str(d.head_dim);
  check_shape(op, q, "q", t, hd, hd_text);
  check_shape(op, k, "k", t, kvd, kvd_text);
  check_shape(op, v, "v", t, kvd, kvd_text);
  check_shape(op, out, "out", t, hd, hd_text);
  check_shape(op, lse, "lse", d.heads, t, "H x T = " + str(d.heads) + " x " + str(t));
  check_cu_seqlens(op, cu_seqlens, t);
  return d;
}

}  // namespace

void check_attention_params(std::string_view op, const AttentionParams& params) {
  check_params(op, params);
}

void check_cu_seqlens(std::string_view op, const std::vector<int32_t>& cu, int64_t tokens) {
  auto listing = [&cu]() {
    std::string s = "cu_seqlens (" + str(static_cast<int64_t>(cu.size())) + " entries) [";
    for (size_t i = 0; i < cu.size() && i < 8; ++i)
      s += (i ? ", " : "") + std::to_string(cu[i]);
    return s + (cu.size() > 8 ? ", ...]" : "]");
  };
  if (cu.size() < 2) fail_op(op, listing() + " needs at least 2 entries (one document)");
  if (cu.front() != 0) fail_op(op, listing() + ": cu_seqlens[0] = " + str(cu.front()) + ", not 0");
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      fail_op(op, listing() + ": cu_seqlens[" + str(static_cast<int64_t>(i)) + "] = " + str(cu[i]) +
                      " < cu_seqlens[" + str(static_cast<int64_t>(i - 1)) +
                      "] = " + str(cu[i - 1]) + ": offsets must not decrease");
  if (cu.back() != tokens)
    fail_op(op, listing() + ": cu_seqlens[" + str(static_cast<int64_t>(cu.size() - 1)) +
                    "] = " + str(cu.back()) + " must equal the token count T = " + str(tokens));
}

AttentionDims check_attention_forward(BackendKind backend, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                                      const AttentionParams& params, const Tensor& out,
                                      const Tensor& lse) {
  constexpr std::string_view op = "attention_forward";
  AttentionDims d = check_common(op, backend, q, k, v, cu_seqlens, params, out, lse);
  const Operand outputs[] = {{&out, "out"}, {&lse, "lse"}};
  const Operand inputs[] = {{&q, "q"}, {&k, "k"}, {&v, "v"}};
  for (const Operand& o : outputs)
    for (const Operand& i : inputs)
      check_disjoint(op, o, i);
  check_disjoint(op, outputs[0], outputs[1]);
  return d;
}

AttentionDims check_attention_backward(BackendKind backend, const Tensor& d_out, const Tensor& q,
                                       const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& lse, const std::vector<int32_t>& cu_seqlens,
                                       const AttentionParams& params, const Tensor& dq,
                                       const Tensor& dk, const Tensor& dv) {
  constexpr std::string_view op = "attention_backward";
  AttentionDims d = check_common(op, backend, q, k, v, cu_seqlens, params, out, lse);
  check_matrix(op, backend, d_out, "d_out");
  check_matrix(op, backend, dq, "dq");
  check_matrix(op, backend, dk, "dk");
  check_matrix(op, backend, dv, "dv");
  check_dtype(op, d_out, "d_out", q.dtype(), "q's dtype");
  check_dtype(op, dq, "dq", q.dtype(), "a gradient has the dtype of what it differentiates");
  check_dtype(op, dk, "dk", q.dtype(), "a gradient has the dtype of what it differentiates");
  check_dtype(op, dv, "dv", q.dtype(), "a gradient has the dtype of what it differentiates");
  check_shape(op, d_out, "d_out", d.tokens, d.heads * d.head_dim, "out's shape");
  check_shape(op, dq, "dq", d.tokens, d.heads * d.head_dim, "q's shape");
  check_shape(op, dk, "dk", d.tokens, d.kv_heads * d.head_dim, "k's shape");
  check_shape(op, dv, "dv", d.tokens, d.kv_heads * d.head_dim, "v's shape");
  const Operand outputs[] = {{&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  const Operand inputs[] = {{&d_out, "d_out"}, {&q, "q"},     {&k, "k"},
                            {&v, "v"},         {&out, "out"}, {&lse, "lse"}};
  for (const Operand& o : outputs)
    for (const Operand& i : inputs)
      check_disjoint(op, o, i);
  check_disjoint(op, outputs[0], outputs[1]);
  check_disjoint(op, outputs[0], outputs[2]);
  check_disjoint(op, outputs[1], outputs[2]);
  return d;
}

AttentionBackwardScratch allocate_attention_backward_scratch(const Backend& backend,
                                                             const AttentionDims& dims) {
  AttentionBackwardScratch scratch;
  scratch.delta = backend.empty({dims.heads, dims.tokens}, DType::kF32, Category::kWorkspace,
                                "attention.delta");
  return scratch;
}

}  // namespace headroom
