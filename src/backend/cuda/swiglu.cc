// swiglu_forward on cuda: out = silu(gate) * up, silu(g) = g * sigmoid(g).
// swiglu_backward on cuda, with s = sigmoid(g):
//   d_up = d_out * silu(g),  d_gate = d_out * up * s * (1 + g * (1 - s)).
// gate, up, out, d_out, d_gate, d_up (T, F), one dtype (fp32, bf16 or fp16:
// fp32 math, one rounding per output), by cuda/swiglu.cu, which computes the
// cpu's sigmoid (cpu/exp_approx.h, fused as the cpu's AVX2 / AVX-512 builds
// fuse it) for the cpu's bits. Elementwise: an output may be an input exactly;
// d_gate and d_up disjoint. Deterministic.
// Allocates: nothing.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_elementwise.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  switch (gate.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::swiglu_forward_f32(gate.data<float>(), up.data<float>(),
                                             out.data<float>(), n, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::swiglu_forward_bf16(bits16(gate), bits16(up), bits16(out), n, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::swiglu_forward_f16(bits16(gate), bits16(up), bits16(out), n, stream()));
      return;
    default:
      refuse_cuda_dtype("swiglu_forward", gate.dtype());
  }
}

void CudaKernels::swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up,
                                  Tensor& d_gate, Tensor& d_up) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  switch (gate.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::swiglu_backward_f32(d_out.data<float>(), gate.data<float>(),
                                              up.data<float>(), d_gate.data<float>(),
                                              d_up.data<float>(), n, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::swiglu_backward_bf16(bits16(d_out), bits16(gate), bits16(up),
                                               bits16(d_gate), bits16(d_up), n, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::swiglu_backward_f16(bits16(d_out), bits16(gate), bits16(up),
                                              bits16(d_gate), bits16(d_up), n, stream()));
      return;
    default:
      refuse_cuda_dtype("swiglu_backward", gate.dtype());
  }
}

}  // namespace headroom
