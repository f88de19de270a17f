// swiglu_forward: out = silu(gate) * up, silu(g) = g * sigmoid(g).
// swiglu_backward, with s = sigmoid(g):
//   d_up   = d_out * silu(g)
//   d_gate = d_out * up * s * (1 + g * (1 - s))        (silu'(g))
// gate, up, out, d_out, d_gate, d_up (T, F), one dtype (fp32 or bf16: fp32
// math, one rounding per output). Elementwise, so an output may be one of the
// inputs exactly (every input of element i is read before i is written);
// d_gate and d_up must be disjoint.
// sigmoid(g) = 1 / (1 + exp(-g)) in fp32: exp overflows to inf for g < -88
// and s becomes 0, silu(g) = g * 0 = -0: no NaN for any finite g.
// Allocates: nothing.
#include <algorithm>
#include <cmath>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

// exp is libm's, one element at a time (no vector variant gives the same
// bits); everything else runs as vectors over chunks of this many elements,
// reading the chunk's exp(-g) from a stack buffer.
constexpr int64_t kChunk = 256;

// Calls body(c0, n, e) for each chunk [c0, c0 + n) of [begin, end), with
// e[j] = exp(-gate[c0 + j]) computed first (libm, one element at a time).
template <typename T, typename Body>
inline __attribute__((always_inline)) void for_each_chunk(const T* gate, int64_t begin, int64_t end,
                                                          Body&& body) {
  float e[kChunk];
  for (int64_t c0 = begin; c0 < end; c0 += kChunk) {
    const int64_t n = std::min(kChunk, end - c0);
    for (int64_t j = 0; j < n; ++j)
      e[j] = std::exp(-widen(gate[c0 + j]));
    body(c0, n, e);
  }
}

template <typename T>
HR_CPU_CLONES void forward_range(const T* gate, const T* up, T* out, int64_t begin, int64_t end) {
  for_each_chunk(
      gate, begin, end, [&](int64_t c0, int64_t n, const float* e) __attribute__((always_inline)) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          float g = widen(gate[c0 + j]);
          float u = widen(up[c0 + j]);
          float s = 1.0f / (1.0f + e[j]);  // sigmoid(g)
          store(out + c0 + j, g * s * u);
        }
      });
}

template <typename T>
HR_CPU_CLONES void backward_range(const T* d_out, const T* gate, const T* up, T* d_gate, T* d_up,
                                  int64_t begin, int64_t end) {
  for_each_chunk(
      gate, begin, end, [&](int64_t c0, int64_t n, const float* e) __attribute__((always_inline)) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          float d = widen(d_out[c0 + j]);
          float g = widen(gate[c0 + j]);
          float u = widen(up[c0 + j]);
          float s = 1.0f / (1.0f + e[j]);  // sigmoid(g)
          float silu = g * s;
          store(d_gate + c0 + j, d * u * (s * (1.0f + g * (1.0f - s))));
          store(d_up + c0 + j, d * silu);
        }
      });
}

template <typename T>
void forward(const T* gate, const T* up, T* out, int64_t n) {
  for_each_thread_range(n, n >= kMinParallelElements,
                        [&](int64_t b, int64_t e) { forward_range(gate, up, out, b, e); });
}

template <typename T>
void backward(const T* d_out, const T* gate, const T* up, T* d_gate, T* d_up, int64_t n) {
  for_each_thread_range(n, n >= kMinParallelElements, [&](int64_t b, int64_t e) {
    backward_range(d_out, gate, up, d_gate, d_up, b, e);
  });
}

}  // namespace

void CpuKernels::swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  int64_t n = gate.numel();
  with_floating_type(gate.dtype(), [&]<typename T>(T*) {
    forward(gate.data<T>(), up.data<T>(), out.data<T>(), n);
  });
}

void CpuKernels::swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up,
                                 Tensor& d_gate, Tensor& d_up) {
  int64_t n = gate.numel();
  with_floating_type(gate.dtype(), [&]<typename T>(T*) {
    backward(d_out.data<T>(), gate.data<T>(), up.data<T>(), d_gate.data<T>(), d_up.data<T>(), n);
  });
}

}  // namespace headroom
