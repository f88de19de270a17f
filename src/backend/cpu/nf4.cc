// nf4_quantize / nf4_dequantize: bitsandbytes' quantize_4bit and
// dequantize_4bit for quant_type "nf4", blocksize 64 (kQuantizeBlockwise and
// kDequantizeBlockwise of bitsandbytes 0.4x-0.50, backend/common/nf4.h for
// the format):
//   absmax[b] = max |w| over block b (fp32, from the stored values)
//   code(i)   = nf4_code(w[i] * (1 / absmax[b]))     the kernel's reciprocal
//   w'[i]     = value(code(i)) * absmax[b]            rounded once to the output
// A block of zeros has absmax 0, 1/0 = inf and 0 * inf = NaN, which the
// decision tree sends to code 0 (-1): its values come back as -1 * 0 = -0,
// as bitsandbytes'.
//
// Double quantization (compress_statistics): offset = mean(absmax) (fp32,
// summed in double), then quantize_blockwise(absmax - offset, blocksize =
// 256) with the signed dynamic map: per block of 256 absmax their own
// absmax2, and each (absmax - offset) * (1 / absmax2) to the nearest value of
// the map. Dequantization rebuilds absmax = map[code] * absmax2 + offset
// into the front's scratch first, as dequantize_blockwise does.
//
// Blocks are independent and each is reduced in one order: the results do
// not depend on the thread count. Allocates: nothing.
#include <algorithm>
#include <cmath>

#include "backend/common/dynamic_map.h"
#include "backend/common/nf4.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"

namespace headroom {

namespace {

template <typename T>
void quantize_codes(const T* w, int64_t n, uint8_t* codes, float* absmax) {
  const int64_t blocks = (n + kNf4Block - 1) / kNf4Block;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kNf4Block, hi = std::min(n, lo + kNf4Block);
    float largest = 0.0f;
    for (int64_t i = lo; i < hi; ++i)
      largest = std::max(largest, std::fabs(widen(w[i])));
    absmax[b] = largest;
    const float inverse = 1.0f / largest;
    // lo is even (64 per block), so the block's bytes are its own. An odd
    // last element pairs with a 0, as the kernel's load pads with 0.
    for (int64_t i = lo; i < hi; i += 2) {
      const uint8_t high = nf4_code(widen(w[i]) * inverse);
      const uint8_t low = nf4_code((i + 1 < hi ? widen(w[i + 1]) : 0.0f) * inverse);
      codes[i / 2] = static_cast<uint8_t>(high << 4 | low);
    }
  }
}

template <typename T>
void dequantize_codes(const uint8_t* codes, const float* absmax, int64_t n, T* out) {
  const std::array<float, 16>& values = nf4_values();
  const int64_t blocks = (n + kNf4Block - 1) / kNf4Block;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kNf4Block, hi = std::min(n, lo + kNf4Block);
    const float scale = absmax[b];
    for (int64_t i = lo; i < hi; ++i) {
      const uint8_t code = (i % 2 == 0) ? codes[i / 2] >> 4 : codes[i / 2] & 0x0f;
      store(out + i, values[code] * scale);
    }
  }
}

}  // namespace

void CpuKernels::nf4_quantize(const Tensor& w, Tensor& scratch, Nf4Weight& q) {
  const int64_t n = w.numel();
  float* absmax = q.double_quant() ? scratch.data<float>() : q.absmax.data<float>();
  with_floating_type(w.dtype(), [&]<typename T>(T*) {
    quantize_codes(w.data<T>(), n, q.codes.data<uint8_t>(), absmax);
  });
  if (!q.double_quant()) return;

  const int64_t blocks = scratch.numel();
  double sum = 0;
  for (int64_t b = 0; b < blocks; ++b)
    sum += absmax[b];
  const float offset = static_cast<float>(sum / static_cast<double>(blocks));
  q.offset.data<float>()[0] = offset;
  const std::array<float, 256>& map = dynamic_map(true);
  uint8_t* qabsmax = q.absmax.data<uint8_t>();
  float* absmax2 = q.absmax2.data<float>();
  for (int64_t b2 = 0; b2 < q.absmax2.numel(); ++b2) {
    const int64_t lo = b2 * kNf4AbsmaxBlock, hi = std::min(blocks, lo + kNf4AbsmaxBlock);
    float largest = 0.0f;
    for (int64_t b = lo; b < hi; ++b)
      largest = std::max(largest, std::fabs(absmax[b] - offset));
    absmax2[b2] = largest;
    const float inverse = 1.0f / largest;
    // Plain nearest value, no sign rule (is_signed = false picks none): the
    // blockwise quantizer's, not the 8-bit optimizer's.
    for (int64_t b = lo; b < hi; ++b)
      qabsmax[b] = largest > 0 ? quantize_to_map(map, false, (absmax[b] - offset) * inverse)
                               : quantize_to_map(map, false, 0.0f);
  }
}

void CpuKernels::nf4_dequantize(const Nf4Weight& q, Tensor& scratch, Tensor& out) {
  const int64_t n = q.numel();
  const float* absmax;
  if (q.double_quant()) {
    const std::array<float, 256>& map = dynamic_map(true);
    const uint8_t* qabsmax = q.absmax.data<uint8_t>();
    const float* absmax2 = q.absmax2.data<float>();
    const float offset = q.offset.data<float>()[0];
    float* rebuilt = scratch.data<float>();
    for (int64_t b = 0; b < scratch.numel(); ++b)
      rebuilt[b] = map[qabsmax[b]] * absmax2[b / kNf4AbsmaxBlock] + offset;
    absmax = rebuilt;
  } else {
    absmax = q.absmax.data<float>();
  }
  with_floating_type(out.dtype(), [&]<typename T>(T*) {
    dequantize_codes(q.codes.data<uint8_t>(), absmax, n, out.data<T>());
  });
}

}  // namespace headroom
