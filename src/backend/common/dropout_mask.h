// dropout's keep decision, shared by every backend and by the tests.
//
// Counter-based (backend/common/rng.h): whether element i is kept depends on (seed,
// i) alone, never on the thread count, the split of the loop or the backend.
// So backward draws forward's mask again from the seed, and no mask (one bit
// or byte per element) has to be saved between them.
//
// Header-only and dependency-free beyond rng.h, for the same reason as rng.h:
// a cuda kernel (one thread per index) must reproduce the cpu mask exactly.
#pragma once

#include <cstdint>

#include "backend/common/rng.h"

namespace headroom {

// Xored into the seed so that dropout's stream for seed s is not
// fill_uniform's stream for seed s: a caller deriving both seeds from one
// counter must not drop exactly the elements it initialized smallest.
inline constexpr uint64_t kDropoutStream = 0x64726f706f757421ull;  // "dropout!"

// Element i is kept when u = random_unit(seed ^ kDropoutStream, i) >= p. u is
// a multiple of 2^-24 in [0, 1), so an element is dropped with probability
// ceil(p * 2^24) / 2^24 (p to within 6e-8); p = 0 keeps every element.
HEADROOM_HOST_DEVICE inline bool dropout_keeps(uint64_t seed, int64_t i, float p) {
  return random_unit(seed ^ kDropoutStream, static_cast<uint64_t>(i)) >= p;
}

// What a kept element is multiplied by: 1 / (1 - p), rounded to fp32 once
// (PyTorch's mask holds the same fp32 value). p = 0 gives exactly 1.
HEADROOM_HOST_DEVICE inline float dropout_scale(float p) {
  return 1.0f / (1.0f - p);
}

}  // namespace headroom
