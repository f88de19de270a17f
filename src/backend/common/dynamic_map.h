// bitsandbytes' dynamic quantization maps, the code books of its 8-bit
// optimizers (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", 2022), written from bitsandbytes 0.50's
// functional.create_dynamic_map(signed, max_exponent_bits=7, total_bits=8):
//
//   for i in 0..6:                      (the decimal exponent: 10^(i-6))
//     n = 2^i + 1 (signed) or 2^(i+1) + 1 (unsigned)
//     b = linspace(0.1, 1, n) (fp32);  means = (b[:-1] + b[1:]) / 2
//     values += 10^(i-6) * means   (and, signed, their negatives)
//   values += [0, 1];  sorted ascending
//
// 254 + 2 = 256 values either way: the signed map (for Adam's m) spans
// [-0.99, 1] with no -1, the unsigned one (for v) [0, 1]; both are dense
// near 0, where most normalized moments lie. The arithmetic is fp32, in
// the scalar order of torch's linspace (the first half counted from the
// start, the second half back from the end): torch 1.13 on an AVX-512 cpu
// gives 422 of the 512 values bit for bit and the other 90 one fp32 ulp
// away (its vectorized linspace steps from each vector's first element, so
// its own last bits depend on the cpu's vector width).
#pragma once

#include <array>
#include <cstdint>

namespace headroom {

// Elements per absmax block of bitsandbytes' blockwise 8-bit optimizers.
inline constexpr int64_t kQuantBlock = 256;

// The 256 values, ascending: signed (m) or unsigned (v).
const std::array<float, 256>& dynamic_map(bool is_signed);

// The code of the value of `map` nearest x (x normalized by its block's
// absmax, so in [-1, 1]; ties go to the lower code). For the signed map
// the code keeps x's sign bit, as bitsandbytes' kernel makes it (a code of
// the other sign is stepped one towards x's side): a small negative
// momentum gets the smallest negative value, not 0; a small positive one
// may get 0.
uint8_t quantize_to_map(const std::array<float, 256>& map, bool is_signed, float x);

}  // namespace headroom
