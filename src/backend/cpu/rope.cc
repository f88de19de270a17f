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
// Allocates: nothing (inv_freq, D/2 floats, and the cos / sin table, at most
// 1 MiB, are host heap for the call, like oneDNN's descriptors: not device
// memory; a cuda kernel recomputes them).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
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

// cos and sin of position * inv_freq[i], fp32, for the sign of the call.
inline void angles_of(float position, const std::vector<float>& inv_freq, float sign, float* c,
                      float* s) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = position * inv_freq[i];
    c[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    s[i] = sign * static_cast<float>(std::sin(static_cast<double>(angle)));
  }
}

// The cos / sin table is at most this big (both halves): 1 MiB is 2048
// positions at head_dim 128. It is host heap outside the allocator, so it
// stays small next to the activations it rotates.
constexpr int64_t kMaxTableBytes = int64_t{1} << 20;

// cos and sin for every position 0..max(positions) ((P, D/2) each, row p for
// position p), computed once per call: a batch repeats positions (every row
// and document restarts at 0), and the double-precision cos / sin were most
// of this op's time when evaluated per token. Empty (each token computes
// its own, as before) when a position is negative, when there are more
// positions than tokens, or past kMaxTableBytes.
struct AngleTable {
  std::vector<float> cos, sin;
  bool empty() const { return cos.empty(); }
};

AngleTable angle_table(const int32_t* positions, int64_t tokens, const std::vector<float>& inv_freq,
                       float sign) {
  const auto half = static_cast<int64_t>(inv_freq.size());
  int64_t rows = 0;
  bool negative = false;
  for (int64_t t = 0; t < tokens; ++t) {
    rows = std::max<int64_t>(rows, int64_t{positions[t]} + 1);
    negative = negative || positions[t] < 0;
  }
  AngleTable table;
  if (negative || rows > tokens || rows * half * 2 * int64_t{sizeof(float)} > kMaxTableBytes)
    return table;
  table.cos.resize(static_cast<size_t>(rows * half));
  table.sin.resize(static_cast<size_t>(rows * half));
#pragma omp parallel for schedule(static) if (rows * half >= kMinParallelElements / 8)
  for (int64_t r = 0; r < rows; ++r)
    angles_of(static_cast<float>(r), inv_freq, sign, table.cos.data() + r * half,
              table.sin.data() + r * half);
  return table;
}

// Tokens [begin, end) of x rotated by the table (its sin already signed), or
// by each token's own angles when the table is empty.
template <typename T>
HR_CPU_CLONES void rotate_range(T* x, const int32_t* positions, const AngleTable& table,
                                const std::vector<float>& inv_freq, float sign, int64_t begin,
                                int64_t end, int64_t width, int64_t head_dim) {
  const int64_t half = head_dim / 2, heads = width / head_dim;
  std::vector<float> own(table.empty() ? static_cast<size_t>(2 * half) : 0);
  for (int64_t t = begin; t < end; ++t) {
    const float* c;
    const float* s;
    if (table.empty()) {
      angles_of(static_cast<float>(positions[t]), inv_freq, sign, own.data(), own.data() + half);
      c = own.data();
      s = own.data() + half;
    } else {
      c = table.cos.data() + positions[t] * half;
      s = table.sin.data() + positions[t] * half;
    }
    T* row = x + t * width;
    for (int64_t h = 0; h < heads; ++h) {
      T* first = row + h * head_dim;
      T* second = first + half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        float a = widen(first[i]), b = widen(second[i]);
        store(first + i, a * c[i] - b * s[i]);
        store(second + i, b * c[i] + a * s[i]);
      }
    }
  }
}

// sign = +1: the rotation; -1: its transpose.
void rotate_tensor(Tensor& x, const Tensor& positions, int64_t head_dim, float theta, float sign) {
  std::vector<float> inv_freq = inverse_frequencies(head_dim, theta);
  int64_t tokens = x.size(0), width = x.size(1);
  const int32_t* p = positions.data<int32_t>();
  const AngleTable table = angle_table(p, tokens, inv_freq, sign);
  with_floating_type(x.dtype(), [&]<typename T>(T*) {
    T* data = x.data<T>();
    for_each_thread_range(tokens, tokens * width >= kMinParallelElements,
                          [&](int64_t b, int64_t e) {
                            rotate_range(data, p, table, inv_freq, sign, b, e, width, head_dim);
                          });
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
