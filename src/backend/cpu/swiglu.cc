// swiglu_forward: out = silu(gate) * up, silu(g) = g * sigmoid(g).
// swiglu_backward, with s = sigmoid(g):
//   d_up   = d_out * silu(g)
//   d_gate = d_out * up * s * (1 + g * (1 - s))        (silu'(g))
// gate, up, out, d_out, d_gate, d_up (T, F), one dtype (fp32 or bf16: fp32
// math, one rounding per output). Elementwise, so an output may be one of the
// inputs exactly (every input of element i is read before i is written);
// d_gate and d_up must be disjoint.
// sigmoid(g) = 1 / (1 + exp(-g)) in fp32, exp by cpu/exp_approx.h (~2 ulp,
// vectorized with the rest of the loop; libm's expf one element at a time
// took as long as everything else here): its argument is clamped to
// [-87, 88], so for g < -88 s is ~6e-39 rather than 0 and silu(g) a tiny
// negative number rather than -0; no NaN for any finite g.
// Allocates: nothing.
#include <type_traits>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/exp_approx.h"
#include "backend/model_op_checks.h"

// The 64-byte vectors below pass only between always-inlined helpers
// (simd_vectors.h): no call with the AVX-512 ABI exists.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace headroom {

namespace {

using cpu_simd::exp_approx;

// bf16 goes 16 elements at a time in GCC vector types first, on CPUs with
// AVX-512: GCC auto-vectorizes the bf16 loops below at 8 fp32 lanes per
// instruction even in the x86-64-v4 clone (it sizes the vectors by the 16-bit
// data), where the fp32 loops get 16. Same operations in the same order, so
// the same bits as the loops, which do the rest. Each returns where it
// stopped. Versioned by CPU (cpu_clones.h, HR_CPU_V4_VERSION): elsewhere
// GCC would split each 64-byte vector lane by lane, and the loops do it all.
HR_CPU_DEFAULT_VERSION int64_t forward_by_16(const bf16*, const bf16*, bf16*, int64_t begin,
                                             int64_t) {
  return begin;
}
HR_CPU_DEFAULT_VERSION int64_t backward_by_16(const bf16*, const bf16*, const bf16*, bf16*, bf16*,
                                              int64_t begin, int64_t) {
  return begin;
}
#if HR_HAVE_CPU_V4_VERSION
HR_CPU_V4_VERSION int64_t forward_by_16(const bf16* gate, const bf16* up, bf16* out, int64_t begin,
                                        int64_t end) {
  using namespace cpu_simd;
  for (; begin + 16 <= end; begin += 16) {
    const v16f g = load16(gate + begin), u = load16(up + begin);
    const v16f s = 1.0f / (1.0f + exp_approx(-g));  // sigmoid(g)
    store16(out + begin, g * s * u);
  }
  return begin;
}
HR_CPU_V4_VERSION int64_t backward_by_16(const bf16* d_out, const bf16* gate, const bf16* up,
                                         bf16* d_gate, bf16* d_up, int64_t begin, int64_t end) {
  using namespace cpu_simd;
  for (; begin + 16 <= end; begin += 16) {
    const v16f d = load16(d_out + begin), g = load16(gate + begin), u = load16(up + begin);
    const v16f s = 1.0f / (1.0f + exp_approx(-g));  // sigmoid(g)
    const v16f silu = g * s;
    store16(d_gate + begin, d * u * (s * (1.0f + g * (1.0f - s))));
    store16(d_up + begin, d * silu);
  }
  return begin;
}
#endif

template <typename T>
HR_CPU_CLONES void forward_range(const T* gate, const T* up, T* out, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<T, bf16>) begin = forward_by_16(gate, up, out, begin, end);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    float g = widen(gate[i]);
    float u = widen(up[i]);
    float s = 1.0f / (1.0f + exp_approx(-g));  // sigmoid(g)
    store(out + i, g * s * u);
  }
}

template <typename T>
HR_CPU_CLONES void backward_range(const T* d_out, const T* gate, const T* up, T* d_gate, T* d_up,
                                  int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<T, bf16>)
    begin = backward_by_16(d_out, gate, up, d_gate, d_up, begin, end);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    float d = widen(d_out[i]);
    float g = widen(gate[i]);
    float u = widen(up[i]);
    float s = 1.0f / (1.0f + exp_approx(-g));  // sigmoid(g)
    float silu = g * s;
    store(d_gate + i, d * u * (s * (1.0f + g * (1.0f - s))));
    store(d_up + i, d * silu);
  }
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
