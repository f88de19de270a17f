#include "backend/common/nf4.h"

namespace headroom {

namespace {

constexpr std::array<float, 16> kValues = {-1.0f,
                                           -0.6961928009986877f,
                                           -0.5250730514526367f,
                                           -0.39491748809814453f,
                                           -0.28444138169288635f,
                                           -0.18477343022823334f,
                                           -0.09105003625154495f,
                                           0.0f,
                                           0.07958029955625534f,
                                           0.16093020141124725f,
                                           0.24611230194568634f,
                                           0.33791524171829224f,
                                           0.44070982933044434f,
                                           0.5626170039176941f,
                                           0.7229568362236023f,
                                           1.0f};

}  // namespace

const std::array<float, 16>& nf4_values() {
  return kValues;
}

Nf4Sizes nf4_sizes(int64_t numel, bool double_quant) {
  Nf4Sizes s;
  s.code_bytes = (numel + 1) / 2;
  s.blocks = (numel + kNf4Block - 1) / kNf4Block;
  if (double_quant) {
    s.blocks2 = (s.blocks + kNf4AbsmaxBlock - 1) / kNf4AbsmaxBlock;
    s.bytes = s.code_bytes + s.blocks + 4 * s.blocks2 + 4;
  } else {
    s.bytes = s.code_bytes + 4 * s.blocks;
  }
  return s;
}

}  // namespace headroom
