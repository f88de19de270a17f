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
#include <cmath>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

inline float sigmoid(float g) {
  return 1.0f / (1.0f + std::exp(-g));
}

template <typename T>
void forward(const T* gate, const T* up, T* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    float g = widen(gate[i]);
    float u = widen(up[i]);
    store(out + i, g * sigmoid(g) * u);
  }
}

template <typename T>
void backward(const T* d_out, const T* gate, const T* up, T* d_gate, T* d_up, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    float d = widen(d_out[i]);
    float g = widen(gate[i]);
    float u = widen(up[i]);
    float s = sigmoid(g);
    float silu = g * s;
    store(d_gate + i, d * u * (s * (1.0f + g * (1.0f - s))));
    store(d_up + i, d * silu);
  }
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
