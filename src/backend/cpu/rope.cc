// rope_forward: rotary embedding in place, Hugging Face Llama convention
// ("rotate_half"). x (T, n * D) viewed as (T, n, D), fp32 or bf16; positions
// (T) int32. For each token t, head h and i < D/2, with a = x[t, h, i] and
// b = x[t, h, i + D/2]:
//   x[t, h, i]       = a * cos(angle) - b * sin(angle)
//   x[t, h, i + D/2] = b * cos(angle) + a * sin(angle)
//   angle = positions[t] * inv_freq[i],  inv_freq[i] = theta^(-2i / D)
// rope_backward applies the transpose (the inverse rotation, sin negated) to
// a gradient in place.
//
// Angles as Hugging Face computes them, in fp32 (LlamaRotaryEmbedding):
//   inv_freq[i] = 1 / theta^(float(2i) / D)   exponent, power and reciprocal each in fp32
//   angle       = float(position) * inv_freq[i], rounded to fp32
// At position 32768 an fp32 angle is off the exact one by up to ~2e-3 rad;
// reproducing that error, rather than computing a better angle, is what
// makes a checkpoint behave as it does under Hugging Face. The power and the
// cos/sin of the fp32 angle are evaluated in double and rounded to fp32 once
// (the correctly rounded fp32 value, which PyTorch's fp32 pow, cos and sin
// approximate to within an ulp), so the result does not depend on the libm.
// Hugging Face then rounds cos and sin to bf16 for bf16 activations and rounds
// each product; this keeps them fp32 and rounds x once.
// Allocates: nothing (inv_freq is D/2 floats of host heap for the call,
// like oneDNN's descriptors: not device memory; a cuda kernel recomputes it).
#include <cmath>
#include <vector>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

std::vector<float> inverse_frequencies(int64_t head_dim, float theta) {
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    auto power =
        static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
    inv_freq[static_cast<size_t>(i)] = 1.0f / power;
  }
  return inv_freq;
}

// sign = +1: the rotation; -1: its transpose.
template <typename T>
void rotate(T* x, const int32_t* positions, int64_t tokens, int64_t width, int64_t head_dim,
            const std::vector<float>& inv_freq, float sign) {
  int64_t half = head_dim / 2, heads = width / head_dim;
#pragma omp parallel for schedule(static) if (tokens * width >= kMinParallelElements)
  for (int64_t t = 0; t < tokens; ++t) {
    float position = static_cast<float>(positions[t]);
    T* row = x + t * width;
    for (int64_t i = 0; i < half; ++i) {
      float angle = position * inv_freq[static_cast<size_t>(i)];
      auto c = static_cast<float>(std::cos(static_cast<double>(angle)));
      float s = sign * static_cast<float>(std::sin(static_cast<double>(angle)));
      for (int64_t h = 0; h < heads; ++h) {
        T* first = row + h * head_dim + i;
        T* second = first + half;
        float a = widen(*first), b = widen(*second);
        store(first, a * c - b * s);
        store(second, b * c + a * s);
      }
    }
  }
}

void rotate_tensor(Tensor& x, const Tensor& positions, int64_t head_dim, float theta, float sign) {
  std::vector<float> inv_freq = inverse_frequencies(head_dim, theta);
  int64_t tokens = x.size(0), width = x.size(1);
  with_floating_type(x.dtype(), [&]<typename T>(T*) {
    rotate(x.data<T>(), positions.data<int32_t>(), tokens, width, head_dim, inv_freq, sign);
  });
}

}  // namespace

void CpuKernels::rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) {
  rotate_tensor(x, positions, head_dim, theta, 1.0f);
}

void CpuKernels::rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim, float theta) {
  rotate_tensor(dx, positions, head_dim, theta, -1.0f);
}

}  // namespace headroom
