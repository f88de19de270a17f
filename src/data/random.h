// Seeded randomness whose results depend only on the seed, never on the
// standard library: std::mt19937_64's output sequence is fixed by the C++
// standard, but std::uniform_int_distribution, std::normal_distribution and
// friends are not (libstdc++ and libc++ give different numbers). Synthetic
// corpora and epoch shuffles must be the same file / the same order on every
// machine, so every distribution the data layer draws from is written here.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace headroom::data_detail {

// SplitMix64's finalizer: a bijective 64-bit mix, used to derive independent
// stream seeds from (seed, epoch) or (seed, document) pairs and to hash Markov
// contexts. Adjacent inputs give unrelated outputs.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The seed of stream `index` under `seed` (epochs, documents).
inline uint64_t stream_seed(uint64_t seed, uint64_t index) {
  return mix64(mix64(seed) ^ (index * 0xd1b54a32d192ed03ull));
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Uniform in (0, 1]: safe to take the log of.
inline double uniform01_open_low(std::mt19937_64& rng) {
  return static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53;
}

// Uniform integer in [0, n), n >= 1, without modulo bias (rejection from the
// largest multiple of n below 2^64).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x = rng();
  while (x >= limit)
    x = rng();
  return x % n;
}

// Standard normal by Box-Muller (one of the pair; simple beats fast here).
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = uniform01_open_low(rng);
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 is boosted through
// Gamma(shape + 1) * U^(1/shape). Normalized Gamma(alpha) draws are a
// Dirichlet(alpha) vector.
inline double gamma_draw(std::mt19937_64& rng, double shape) {
  if (shape < 1.0) {
    const double boost = std::pow(uniform01_open_low(rng), 1.0 / shape);
    return gamma_draw(rng, shape + 1.0) * boost;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0.0;
    double v = 0.0;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform01_open_low(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace headroom::data_detail
