// Counter-based uniform random numbers: value i of a stream depends only on
// (seed, i), never on how many values came before it or which thread asked.
// So fill_uniform gives the same bits on every backend and thread count, and
// a cuda kernel (one thread per index) reproduces the cpu loop exactly.
//
// Header-only and dependency-free on purpose: the top-level cuda/ kernels
// include it too (it compiles as __host__ __device__ under nvcc).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HEADROOM_HOST_DEVICE __host__ __device__
#else
#define HEADROOM_HOST_DEVICE
#endif

namespace headroom {

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit
// mixer whose outputs pass BigCrush when fed a Weyl sequence.
HEADROOM_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Bits number `index` of the stream `seed`: the splitmix64 sequence started
// from a mixed seed, so nearby seeds (0, 1, 2, ...) give unrelated streams.
HEADROOM_HOST_DEVICE inline uint64_t random_bits(uint64_t seed, uint64_t index) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
  return splitmix64_mix(splitmix64_mix(seed) + (index + 1) * kGolden);
}

// Uniform on [0, 1): the top 24 bits, so every value is an exact float.
HEADROOM_HOST_DEVICE inline float random_unit(uint64_t seed, uint64_t index) {
  return static_cast<float>(random_bits(seed, index) >> 40) * (1.0f / 16777216.0f);
}

// Uniform on [lo, hi], as lo + (hi - lo) * u rounded after each operation
// (hi itself can only come out through that rounding). The multiply and the
// add are kept apart so no compiler fuses them into an fma, which would round
// once and change the bits on one backend only: nvcc fuses by default, hence
// the _rn intrinsics; clang's -ffp-contract=on fuses only within a statement.
HEADROOM_HOST_DEVICE inline float random_uniform(uint64_t seed, uint64_t index, float lo,
                                                 float hi) {
  float u = random_unit(seed, index);
#if defined(__CUDA_ARCH__)
  return __fadd_rn(lo, __fmul_rn(hi - lo, u));
#else
  float offset = (hi - lo) * u;
  return lo + offset;
#endif
}

}  // namespace headroom
