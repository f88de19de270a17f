// A frozen weight stored in NF4 (backend/common/nf4.h): the storage of one
// bitsandbytes Params4bit and its QuantState, as tensors of the allocator.
#pragma once

#include "tensor/tensor.h"

namespace headroom {

struct Nf4Weight {
  Shape shape;   // (out, in): the weight it stands for
  Tensor codes;  // (ceil(n / 2)) uint8, two codes per byte, the first in the high nibble
  // Without double quantization: (ceil(n / 64)) fp32, each block's absmax.
  // With it: (ceil(n / 64)) uint8, codes of (absmax - offset) into the signed
  // dynamic map, scaled by absmax2 per block of 256.
  Tensor absmax;
  Tensor absmax2;  // (ceil(ceil(n / 64) / 256)) fp32; double quantization only
  Tensor offset;   // (1) fp32, the mean of the fp32 absmax; double quantization only

  bool defined() const { return codes.defined(); }
  bool double_quant() const { return absmax2.defined(); }
  int64_t numel() const { return numel_of(shape); }
};

}  // namespace headroom
