// The stand-in `train` and `plan` drive until the transformer lands (issue 3).
//
// It is not a model and learns nothing. It makes the allocation pattern of a
// training step — weights, gradients and two optimizer states at init; per
// step saved activations in forward, a logits tensor in the loss phase,
// gradient GEMMs in backward that free the saved activations, an update in
// the optimizer phase — with real GEMMs on cpu and none on meta, so the
// allocator, the accounting, the OOM postmortem and the trace are exercised
// end to end, and plan = run can be checked event by event.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace headroom {

struct StandInShape {
  int64_t tokens = 512;  // rows of every activation (batch.max_tokens_per_micro_batch)
  int64_t width = 256;   // C
  int64_t layers = 4;
  int64_t vocab = 4096;  // columns of the logits
  DType dtype = DType::kF32;
};

class StandInWorkload {
 public:
  // Allocates and initializes the weights, gradients and optimizer states
  // (phase init). Throws OutOfMemory.
  StandInWorkload(Backend& backend, const StandInShape& shape, uint64_t seed);

  // One step: forward, loss, backward, optimizer, each under its PhaseScope.
  // Everything it allocates is freed before it returns.
  void step(int64_t step);

  // Parameters (weights of the layers and the head), for the summary line.
  int64_t num_parameters() const;
  const StandInShape& shape() const { return shape_; }

 private:
  Backend& backend_;
  StandInShape shape_;
  uint64_t seed_;
  std::vector<Tensor> weights_;  // layers x (C, C), then the head (V, C)
  std::vector<Tensor> grads_;    // same shapes, fp32
  std::vector<Tensor> adam_m_;   // same shapes, fp32
  std::vector<Tensor> adam_v_;
};

}  // namespace headroom
