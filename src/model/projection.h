// One projection of a block, y = x W^T (+ bias) (+ its LoRA adapter), in
// each form the base weight W (out, in) takes:
//   trainable  W dense; dW (and d_bias) accumulated from the x it is handed;
//   frozen     W dense, no dW: the caller keeps no x for it (as PyTorch
//              saves no input for a weight that needs no gradient);
//   NF4        W frozen in NF4 (QLoRA): dequantized into a short-lived
//              buffer (category workspace, "<tag>.dequant") for the one gemm
//              that reads it, in forward and again in backward, as
//              bitsandbytes' MatMul4Bit does.
// The Qwen2 bias is part of the base layer, before the adapter, as in PEFT.
#pragma once

#include <string>

#include "backend/backend.h"
#include "model/lora.h"

namespace headroom {

struct Projection {
  const Tensor* weight = nullptr;  // (out, in); null when nf4 is set
  const Nf4Weight* nf4 = nullptr;  // (out, in) in NF4
  const Tensor* bias = nullptr;    // (out), or null
  Tensor d_weight;                 // (out, in) accumulated; undefined: frozen
  Tensor d_bias;                   // (out) accumulated; undefined: frozen or no bias
  Adapter adapter;                 // undefined: none
  std::string tag;                 // "block.3.attn.q", the output's tag
};

// y (T, out) = x (T, in) W^T + bias, then the adapter's part added; fills
// `saved` with what the adapter keeps.
void project_forward(Backend& backend, const Projection& p, const Tensor& x, Tensor& y,
                     AdapterSaved& saved);

// dx (T, in) = beta * dx + dy W + the adapter's part (beta 0 writes, 1
// accumulates); the adapter's gradients; then, when trainable, dW += dy^T x
// and d_bias += the column sums of dy. `x` is the forward's input (only
// read when trainable).
void project_backward(Backend& backend, Projection& p, const Tensor& dy, const Tensor& x,
                      Tensor& dx, float beta, AdapterSaved& saved);

}  // namespace headroom
