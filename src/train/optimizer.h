// AdamW over flat parameter groups, with fp32 master weights when the
// parameters are bf16 (mixed precision: 2 bytes param + 2 grad + 4 master +
// 4 + 4 Adam states = 16 bytes per parameter, ZeRO's 16Ψ).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/param_group.h"

namespace headroom {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  // Allocates, in phase init, category optim: m and v (fp32) per group and,
  // for bf16 parameters, an fp32 master copy cast from the current values
  // (so call it after the weights are initialized or loaded).
  AdamW(Backend& backend, const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
        const AdamWConfig& config);

  // One update with learning rate lr; grad_scale multiplies the gradients
  // first (clipping). Weight decay skips norm weights and biases, as the
  // Hugging Face Trainer does. `step` counts from 1 (bias correction).
  void step(std::vector<FlatGroup>& grads, float lr, float grad_scale, int64_t step);

  // What a checkpoint must hold to resume exactly, as (name, fp32 flat
  // buffer): "<group>.adam_m", "<group>.adam_v" and, for bf16 parameters,
  // "<group>.master", in group order.
  std::vector<std::pair<std::string, Tensor*>> state();

 private:
  Backend& backend_;
  const std::vector<GroupLayout>& layouts_;
  std::vector<FlatGroup>& params_;
  AdamWConfig config_;
  std::vector<FlatGroup> master_;  // empty groups (undefined) for fp32 params
  std::vector<FlatGroup> m_;
  std::vector<FlatGroup> v_;
};

// Sum of squares of every gradient, on the host (double); NaN or inf when
// any gradient is not finite.
double grad_sum_of_squares(Backend& backend, std::vector<FlatGroup>& grads);

}  // namespace headroom
