// Learning rate per optimizer step: linear warmup from 0, then cosine,
// linear or constant decay to min_lr at the last step.
#pragma once

#include <cstdint>

namespace headroom {

enum class Decay { kCosine, kLinear, kConstant };

struct LrSchedule {
  double lr = 3e-4;  // peak, reached at the end of warmup
  double min_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  Decay decay = Decay::kCosine;

  // step counts from 0. During warmup lr * (step + 1) / warmup_steps, so the
  // first step already moves; after it the decay runs from lr (at the first
  // step after warmup) to min_lr (at the last step, total_steps - 1).
  double at(int64_t step) const;
};

}  // namespace headroom
