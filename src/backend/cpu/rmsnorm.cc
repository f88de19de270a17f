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

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

constexpr int64_t kLanes = 8;         // independent accumulators for a row's sum
constexpr int64_t kColumnBlock = 64;  // dw columns per thread task

// sum_i a[i] * b[i] * c[i] in double (c may be null: then 1), over kLanes
// interleaved accumulators combined in lane order. Products of up to three
// floats are exact or nearly so in double.
template <typename T, typename U>
inline __attribute__((always_inline)) double row_dot(const T* a, const T* b, const U* c,
                                                     int64_t n) {
  std::array<double, kLanes> lanes{};
  auto term = [&](int64_t i) {
    double t = static_cast<double>(widen(a[i])) * static_cast<double>(widen(b[i]));
    return c != nullptr ? t * static_cast<double>(widen(c[i])) : t;
  };
  // Lane l sums the elements i = l (mod kLanes) in order; written as whole
  // blocks of kLanes (then the tail) so the lanes are one vector.
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[static_cast<size_t>(l)] += term(i + l);
  for (; i < n; ++i)
    lanes[static_cast<size_t>(i - (n / kLanes) * kLanes)] += term(i);
  double sum = 0;
  for (double lane : lanes)
    sum += lane;
  return sum;
}

template <typename T>
HR_CPU_CLONES void forward_rows(const T* x, const T* w, float eps, T* y, float* rstd, int64_t begin,
                                int64_t end, int64_t width) {
  for (int64_t n = begin; n < end; ++n) {
    const T* xr = x + n * width;
    double mean_square = row_dot<T, T>(xr, xr, nullptr, width) / static_cast<double>(width);
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
    double dot = row_dot(dyr, xr, w, width);  // sum_j dy[j] w[j] x[j]
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
