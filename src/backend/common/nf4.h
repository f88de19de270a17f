// bitsandbytes' NF4 ("4-bit NormalFloat", Dettmers et al., "QLoRA", 2023),
// as bitsandbytes 0.4x-0.50's quantize_4bit(quant_type = "nf4") stores a
// weight: the tensor flattened row-major, cut into blocks of 64 elements;
// each block's values divided by its absmax (fp32) and rounded to the
// nearest of 16 values, the quantiles of N(0, 1) scaled to [-1, 1] with an
// exact zero (functional.create_normal_map(offset = 0.9677083,
// use_extra_value = True)); two 4-bit codes per byte, the first element in
// the high nibble.
//
// Double quantization (bnb_4bit_use_double_quant, QuantState.state2): the
// fp32 absmax of every 64-block, minus their mean (`offset`), is quantized
// again blockwise in 8 bits with the signed dynamic map (dynamic_map.h),
// blocks of 256 absmax each with an fp32 absmax of their own.
//
// Bytes per weight element: 0.5 + 4/64 = 0.5625 without double
// quantization, 0.5 + 1/64 + 4/(64*256) ~ 0.5159 with it.
#pragma once

#include <array>
#include <cstdint>

#include "backend/common/rng.h"  // HEADROOM_HOST_DEVICE

namespace headroom {

// Elements per absmax of the 4-bit codes (bitsandbytes' default blocksize).
inline constexpr int64_t kNf4Block = 64;
// Absmax per second-level absmax under double quantization.
inline constexpr int64_t kNf4AbsmaxBlock = 256;

// The 16 values of code 0..15, ascending, as bitsandbytes' kernels hold them
// (dDequantizeNF4): fp32 roundings of the normalized normal quantiles.
const std::array<float, 16>& nf4_values();

// The code of x (a value already divided by its block's absmax): the number
// of the 15 midpoints between neighbouring values that x exceeds, which is
// bitsandbytes' dQuantizeNF4 decision tree (strict >, so a value exactly on
// a midpoint goes to the lower code, and NaN to code 0). Inline here, not
// in nf4.cc, so that cuda/nf4.cu computes the same codes on the device.
HEADROOM_HOST_DEVICE inline uint8_t nf4_code(float x) {
  // bitsandbytes' dQuantizeNF4 pivots (csrc/kernels.cu), ascending: each the
  // fp32 midpoint of two neighbouring values of nf4_values(). Local, since a
  // namespace-scope array is not visible to device code.
  constexpr float kMidpoints[15] = {
      -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
      -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
      0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
      0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f};
  uint8_t code = 0;
  for (float m : kMidpoints)
    code += x > m ? 1 : 0;
  return code;
}

// How a weight of `numel` elements is stored.
struct Nf4Sizes {
  int64_t code_bytes = 0;  // ceil(numel / 2): codes, two per byte
  int64_t blocks = 0;      // ceil(numel / 64): one absmax each
  int64_t blocks2 = 0;     // ceil(blocks / 256): double quantization's absmax; 0 without
  int64_t bytes = 0;       // all of it (the offset included)
};
Nf4Sizes nf4_sizes(int64_t numel, bool double_quant);

}  // namespace headroom
