// rmsnorm_forward: y = x * rstd * w row by row, rstd = 1 / sqrt(mean(x^2) +
// eps); x, y (N, C), w (C) one dtype (fp32 or bf16); rstd (N) fp32 written
// and saved for backward (y is not needed there).
// rmsnorm_backward, with r = rstd[n] and g = dy * w:
//   dx[n, i] = r * g[i] - x[n, i] * r^3 / C * sum_j g[j] x[n, j]   (written)
//   dw[i]   += sum_n dy[n, i] * x[n, i] * r                        (accumulated)
// dw may be undefined (a frozen norm weight, as in LoRA): then only dx is
// computed, by the same loop, so dx has the same bits either way.
//
// Numerics: sums over a row or over rows accumulate in double in a fixed
// order; everything elementwise is fp32; bf16 values are widened on load and
// rounded once on store. Hugging Face's LlamaRMSNorm rounds x * rstd to bf16
// before multiplying by w (two roundings); this rounds once, which is at least
// as close to the exact result.
//
// Deterministic for any thread count: rows are independent, and dw is summed
// by column blocks, each owned by one thread walking the rows in order (no
// per-thread partial sums to combine).
// Allocates: nothing.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

// The lane vectors are 64 bytes; on a baseline (SSE) build GCC warns that
// passing one by value has another ABI than an AVX build's. Every function
// taking or returning one is always inlined into its (cloned) caller, so no
// such call exists.
#pragma GCC diagnostic ignored "-Wpsabi"
#define HR_ROW_INLINE inline __attribute__((always_inline))

namespace headroom {

namespace {

constexpr int64_t kLanes = 8;         // independent accumulators for a row's sum
constexpr int64_t kColumnBlock = 64;  // dw columns per thread task

using v4d = double __attribute__((vector_size(4 * sizeof(double))));
using v4f = float __attribute__((vector_size(4 * sizeof(float))));
using v4u32 = uint32_t __attribute__((vector_size(4 * sizeof(uint32_t))));
static_assert(kLanes == 8, "Lanes below is 8 wide");

// kLanes doubles as two 4-wide halves, lanes 0-3 and 4-7: an AVX2 register
// each. As one 8-wide vector GCC kept the accumulator in memory on AVX2,
// with a store and reload per block, and as an array indexed per lane it
// did not vectorize the row sums at all.
struct Lanes {
  v4d low, high;
};

// a[0 .. 8) widened to double, in the lanes row_dot sums them in. Each
// half is built element by element, which GCC turns into one vcvtps2pd from
// four floats to four doubles; __builtin_convertvector of a v4f did that in
// 2-lane pieces, with shuffles, and was most of the row loop's
// instructions.
HR_ROW_INLINE v4d to_double(const v4f& v) {
  return v4d{v[0], v[1], v[2], v[3]};
}
// fp32: elements 0-3 in `low`, 4-7 in `high`.
HR_ROW_INLINE Lanes load_lanes(const float* a) {
  v4f low, high;
  __builtin_memcpy(&low, a, sizeof low);
  __builtin_memcpy(&high, a + 4, sizeof high);
  return {to_double(low), to_double(high)};
}
HR_ROW_INLINE Lanes load_lanes(const f16* a) {
  return {v4d{widen(a[0]), widen(a[1]), widen(a[2]), widen(a[3])},
          v4d{widen(a[4]), widen(a[5]), widen(a[6]), widen(a[7])}};
}
// bf16: the even elements 0, 2, 4, 6 in `low`, the odd ones in `high`. Read
// as four 32-bit pairs, an even element is a pair's low half (shifted up)
// and an odd one its high half (masked), so each half is one shift or AND
// from memory and one vcvtps2pd; widening 8 in order and splitting the
// result took three times the instructions.
HR_ROW_INLINE Lanes load_lanes(const bf16* a) {
  v4u32 pairs;
  __builtin_memcpy(&pairs, a, sizeof pairs);
  const v4u32 even = pairs << 16, odd = pairs & 0xffff0000u;
  v4f low, high;
  __builtin_memcpy(&low, &even, sizeof low);
  __builtin_memcpy(&high, &odd, sizeof high);
  return {to_double(low), to_double(high)};
}
// The tail's n < kLanes elements in the lanes load_lanes puts them in, the
// other lanes 0 (a zero-padded copy through load_lanes).
template <typename T>
HR_ROW_INLINE Lanes load_tail(const T* a, int64_t n) {
  T padded[kLanes] = {};
  for (int64_t l = 0; l < n; ++l)
    padded[l] = a[l];
  return load_lanes(padded);
}

// sum_i a[i] * b[i] (* c[i] when kWithC) in double, over kLanes interleaved
// accumulators combined in lane order: each lane sums, in order, the
// elements of one residue i mod kLanes (load_lanes says which; the tail's
// missing lanes add 0). Products of up to three floats are exact or nearly
// so in double.
template <bool kWithC, typename T>
HR_ROW_INLINE double row_dot(const T* a, const T* b, const T* c, int64_t n) {
  Lanes sum{};
  auto add = [&](const Lanes& x, const Lanes& y, const Lanes& z) {
    v4d low = x.low * y.low, high = x.high * y.high;
    if constexpr (kWithC) {
      low = low * z.low;
      high = high * z.high;
    }
    sum.low += low;
    sum.high += high;
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    add(load_lanes(a + i), load_lanes(b + i), kWithC ? load_lanes(c + i) : Lanes{});
  if (i < n)
    add(load_tail(a + i, n - i), load_tail(b + i, n - i),
        kWithC ? load_tail(c + i, n - i) : Lanes{});
  double total = 0;
  for (int l = 0; l < 4; ++l)
    total += sum.low[l];
  for (int l = 0; l < 4; ++l)
    total += sum.high[l];
  return total;
}

template <typename T>
HR_CPU_CLONES void forward_rows(const T* x, const T* w, float eps, T* y, float* rstd, int64_t begin,
                                int64_t end, int64_t width) {
  for (int64_t n = begin; n < end; ++n) {
    const T* xr = x + n * width;
    double mean_square = row_dot<false>(xr, xr, xr, width) / static_cast<double>(width);
    float r = static_cast<float>(1.0 / std::sqrt(mean_square + static_cast<double>(eps)));
    rstd[n] = r;
    T* yr = y + n * width;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i)
      store(yr + i, widen(xr[i]) * r * widen(w[i]));
  }
}

template <typename T>
void forward(const T* x, const T* w, float eps, T* y, float* rstd, int64_t rows, int64_t width) {
  for_each_thread_range(rows, rows * width >= kMinParallelElements, [&](int64_t b, int64_t e) {
    forward_rows(x, w, eps, y, rstd, b, e, width);
  });
}

template <typename T>
HR_CPU_CLONES void backward_rows(const T* dy, const T* x, const T* w, const float* rstd, T* dx,
                                 int64_t begin, int64_t end, int64_t width) {
  for (int64_t n = begin; n < end; ++n) {
    const T* dyr = dy + n * width;
    const T* xr = x + n * width;
    double r = rstd[n];
    double dot = row_dot<true>(dyr, xr, w, width);  // sum_j dy[j] w[j] x[j]
    float coefficient = static_cast<float>(r * r * r * dot / static_cast<double>(width));
    float rf = static_cast<float>(r);
    T* dxr = dx + n * width;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i)
      store(dxr + i, rf * (widen(dyr[i]) * widen(w[i])) - coefficient * widen(xr[i]));
  }
}

// dw's column blocks [begin, end), each summed over every row in order.
template <typename T>
HR_CPU_CLONES void weight_gradient_blocks(const T* dy, const T* x, const float* rstd, T* dw,
                                          int64_t begin, int64_t end, int64_t rows, int64_t width) {
  for (int64_t b = begin; b < end; ++b) {
    int64_t c0 = b * kColumnBlock;
    int64_t count = std::min(kColumnBlock, width - c0);
    std::array<double, kColumnBlock> sum{};
    for (int64_t n = 0; n < rows; ++n) {
      const T* dyr = dy + n * width + c0;
      const T* xr = x + n * width + c0;
      double r = rstd[n];
#pragma omp simd
      for (int64_t c = 0; c < count; ++c)
        sum[c] += static_cast<double>(widen(dyr[c])) * static_cast<double>(widen(xr[c])) * r;
    }
    for (int64_t c = 0; c < count; ++c)
      store(dw + c0 + c, static_cast<float>(static_cast<double>(widen(dw[c0 + c])) + sum[c]));
  }
}

template <typename T>
void backward(const T* dy, const T* x, const T* w, const float* rstd, T* dx, T* dw, int64_t rows,
              int64_t width) {
  bool parallel = rows * width >= kMinParallelElements;
  for_each_thread_range(rows, parallel, [&](int64_t b, int64_t e) {
    backward_rows(dy, x, w, rstd, dx, b, e, width);
  });
  if (dw == nullptr) return;  // frozen weight
  int64_t blocks = (width + kColumnBlock - 1) / kColumnBlock;
  for_each_thread_range(blocks, parallel, [&](int64_t b, int64_t e) {
    weight_gradient_blocks(dy, x, rstd, dw, b, e, rows, width);
  });
}

}  // namespace

void CpuKernels::rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                                 Tensor& rstd) {
  int64_t rows = x.size(0), width = x.size(1);
  with_floating_type(x.dtype(), [&]<typename T>(T*) {
    forward(x.data<T>(), w.data<T>(), eps, y.data<T>(), rstd.data<float>(), rows, width);
  });
}

void CpuKernels::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                  const Tensor& rstd, Tensor& dx, Tensor& dw) {
  int64_t rows = x.size(0), width = x.size(1);
  with_floating_type(x.dtype(), [&]<typename T>(T*) {
    backward(dy.data<T>(), x.data<T>(), w.data<T>(), rstd.data<float>(), dx.data<T>(),
             dw.defined() ? dw.data<T>() : nullptr, rows, width);
  });
}

}  // namespace headroom
