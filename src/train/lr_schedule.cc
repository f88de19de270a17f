#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace headroom {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == Decay::kConstant) return lr;
  const int64_t decay_steps = total_steps - 1 - warmup_steps;
  if (decay_steps <= 0) return lr;
  const double progress = std::clamp(
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  if (decay == Decay::kLinear) return lr + (min_lr - lr) * progress;
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace headroom
