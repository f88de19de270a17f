#include "model/lora.h"

#include <algorithm>

namespace headroom {

const char* lora_target_name(LoraTarget target) {
  static const char* const kNames[kNumLoraTargets] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                      "gate_proj", "up_proj", "down_proj"};
  return kNames[target];
}

bool LoraOptions::targets_contain(LoraTarget t) const {
  return std::find(targets.begin(), targets.end(), t) != targets.end();
}

void adapter_forward(Backend& b, const Adapter& adapter, const Tensor& x, Tensor& y,
                     AdapterSaved& saved) {
  const int64_t T = x.size(0), r = adapter.a.size(0);
  Tensor xd = x;
  if (adapter.dropout > 0) {
    xd = b.empty(x.shape(), x.dtype(), Category::kActivation, adapter.tag + ".x_dropped");
    b.dropout(x, adapter.dropout, adapter.dropout_seed, xd);
  }
  Tensor u = b.empty({T, r}, x.dtype(), Category::kActivation, adapter.tag + ".xa");
  b.gemm(xd, false, adapter.a, true, u, 1.0f, 0.0f);          // (T, r) = (T, in) @ (r, in)^T
  b.gemm(u, false, adapter.b, true, y, adapter.scale, 1.0f);  // (T, out) += s * (T, r) @ (out, r)^T
  saved.x = xd;
  saved.u = u;
}

void adapter_backward(Backend& b, Adapter& adapter, const Tensor& dy, Tensor& dx,
                      AdapterSaved& saved) {
  const int64_t T = dy.size(0), r = adapter.a.size(0);
  // du = s * dy B: the gradient at x A^T.
  Tensor du = b.empty({T, r}, dy.dtype(), Category::kActivation, adapter.tag + ".xa.grad");
  b.gemm(dy, false, adapter.b, false, du, adapter.scale, 0.0f);  // (T, r) = s * (T, out) @ (out, r)
  b.gemm(dy, true, saved.u, false, adapter.d_b, adapter.scale, 1.0f);  // (out, r) += s * dy^T @ u
  saved.u = Tensor();
  b.gemm(du, true, saved.x, false, adapter.d_a, 1.0f, 1.0f);  // (r, in) += du^T @ x
  saved.x = Tensor();
  if (adapter.dropout > 0) {
    // Dropout is its own backward with the same mask.
    Tensor dxd =
        b.empty(dx.shape(), dx.dtype(), Category::kActivation, adapter.tag + ".x_dropped.grad");
    b.gemm(du, false, adapter.a, false, dxd, 1.0f, 0.0f);  // (T, in) = du @ A
    b.dropout(dxd, adapter.dropout, adapter.dropout_seed, dxd);
    b.add(dx, dxd, dx);
  } else {
    b.gemm(du, false, adapter.a, false, dx, 1.0f, 1.0f);  // (T, in) += du @ A
  }
}

}  // namespace headroom
