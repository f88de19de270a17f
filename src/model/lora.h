// LoRA (Hu et al. 2021) as PEFT does it: a frozen projection W (out, in)
// gets a trainable pair A (r, in), B (out, r), and its output becomes
//   y = x W^T + (alpha / r) * (dropout(x) A^T) B^T.
// The adapter's forward and backward, written out; which projections have
// one and where their tensors live is the model's (layouts.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace headroom {

// The projections LoRA can adapt, in PEFT's module names and this order.
enum LoraTarget : int {
  kLoraQ,
  kLoraK,
  kLoraV,
  kLoraO,
  kLoraGate,
  kLoraUp,
  kLoraDown,
  kNumLoraTargets
};
// "q_proj", "k_proj", ..., "down_proj".
const char* lora_target_name(LoraTarget target);

struct LoraOptions {
  bool enabled = false;
  int64_t rank = 16;
  float alpha = 32.0f;  // the update is scaled by alpha / rank
  float dropout = 0.0f;
  std::vector<LoraTarget> targets = {kLoraQ, kLoraV};
  uint64_t seed = 0;           // A's init (B starts at zero)
  bool gaussian_init = false;  // A ~ N(0, 1/r) (PEFT's "gaussian"); else Kaiming-uniform

  bool targets_contain(LoraTarget t) const;
};

// One adapter of one projection, for one forward or backward.
struct Adapter {
  Tensor a;    // (r, in)
  Tensor b;    // (out, r)
  Tensor d_a;  // (r, in)   accumulated (backward only)
  Tensor d_b;  // (out, r)  accumulated (backward only)
  float scale = 1;
  float dropout = 0;
  uint64_t dropout_seed = 0;  // the same in forward, recompute and backward
  std::string tag;            // "block.3.attn.q.lora": prefix of its activations' tags

  bool defined() const { return a.defined(); }
};

// What the adapter keeps for backward.
struct AdapterSaved {
  Tensor x;  // (T, in) its input after dropout, for dA; without dropout the caller's x itself
  Tensor u;  // (T, r)  x A^T, for dB
};

// y += scale * (dropout(x) A^T) B^T; fills `saved`.
void adapter_forward(Backend& backend, const Adapter& adapter, const Tensor& x, Tensor& y,
                     AdapterSaved& saved);
// dx += the adapter's part of the input gradient; dA, dB accumulated;
// `saved` is released.
void adapter_backward(Backend& backend, Adapter& adapter, const Tensor& dy, Tensor& dx,
                      AdapterSaved& saved);

}  // namespace headroom
