#include "model/projection.h"

namespace headroom {

namespace {

// Multiplies with W: C = alpha * op(A) @ op(W) + beta * C, or, with a bias,
// C = A @ op(W) + bias (alpha 1, beta 0: the forward's shape), W dense or
// dequantized for this one call.
void gemm_with_weight(Backend& b, const Projection& p, const Tensor& a, bool transpose_w, Tensor& c,
                      float beta, const Tensor* bias = nullptr) {
  Tensor dequantized;
  if (p.weight == nullptr)
    dequantized = b.nf4_dequantize(*p.nf4, a.dtype(), Category::kWorkspace, p.tag + ".dequant");
  const Tensor& w = p.weight != nullptr ? *p.weight : dequantized;
  if (bias != nullptr)
    b.gemm_bias(a, false, w, transpose_w, c, *bias);
  else
    b.gemm(a, false, w, transpose_w, c, 1.0f, beta);
}

}  // namespace

void project_forward(Backend& b, const Projection& p, const Tensor& x, Tensor& y,
                     AdapterSaved& saved) {
  // (T, out) = (T, in) @ (out, in)^T (+ bias (out))
  gemm_with_weight(b, p, x, true, y, 0.0f, p.bias);
  if (p.adapter.defined()) adapter_forward(b, p.adapter, x, y, saved);
}

void project_backward(Backend& b, Projection& p, const Tensor& dy, const Tensor& x, Tensor& dx,
                      float beta, AdapterSaved& saved) {
  // dy is read by the dX gemm, the adapter's two and the dW gemm: widened
  // once where gemms widen. x is not shared across a block's projections:
  // its copy would then be held through their dX gemms, whose own copies
  // make a block's backward peak.
  const SharedGemmOperand shared_dy = b.share_gemm_operand(dy);
  gemm_with_weight(b, p, dy, false, dx, beta);  // (T, in) (+)= (T, out) @ (out, in)
  if (p.adapter.defined()) adapter_backward(b, p.adapter, dy, dx, saved);
  if (p.d_weight.defined())
    b.gemm(dy, true, x, false, p.d_weight, 1.0f, 1.0f);  // (out, in) += dy^T @ x
  if (p.d_bias.defined()) b.bias_backward(dy, p.d_bias);
}

}  // namespace headroom
