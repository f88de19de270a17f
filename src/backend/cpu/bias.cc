// bias_forward: x[t, :] += bias[:] in place; x (T, N), bias (N), one dtype
// (bf16: added in fp32, rounded once). Qwen2's q/k/v projection biases.
// bias_backward: d_bias[:] += sum over t of dy[t, :]; dy (T, N), d_bias (N)
// one dtype, accumulated. The column sums are in double, each owned by one
// thread walking the rows in order, and rounded into d_bias once: the same
// bits for any thread count.
// Allocates: nothing.
#include <algorithm>
#include <array>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

constexpr int64_t kColumnBlock = 64;  // d_bias columns per thread task

template <typename T>
void add_rows(T* x, const T* bias, int64_t rows, int64_t width) {
#pragma omp parallel for schedule(static) if (rows * width >= kMinParallelElements)
  for (int64_t t = 0; t < rows; ++t) {
    T* row = x + t * width;
    for (int64_t i = 0; i < width; ++i)
      store(row + i, widen(row[i]) + widen(bias[i]));
  }
}

template <typename T>
void sum_rows_into(const T* dy, T* d_bias, int64_t rows, int64_t width) {
  int64_t blocks = (width + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * width >= kMinParallelElements)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t c0 = b * kColumnBlock;
    int64_t count = std::min(kColumnBlock, width - c0);
    std::array<double, kColumnBlock> sum{};
    for (int64_t t = 0; t < rows; ++t) {
      const T* row = dy + t * width + c0;
      for (int64_t c = 0; c < count; ++c)
        sum[c] += static_cast<double>(widen(row[c]));
    }
    for (int64_t c = 0; c < count; ++c)
      store(d_bias + c0 + c,
            static_cast<float>(static_cast<double>(widen(d_bias[c0 + c])) + sum[c]));
  }
}

}  // namespace

void CpuKernels::bias_forward(Tensor& x, const Tensor& bias) {
  with_floating_type(x.dtype(), [&]<typename T>(T*) {
    add_rows(x.data<T>(), bias.data<T>(), x.size(0), x.size(1));
  });
}

void CpuKernels::bias_backward(const Tensor& dy, Tensor& d_bias) {
  with_floating_type(dy.dtype(), [&]<typename T>(T*) {
    sum_rows_into(dy.data<T>(), d_bias.data<T>(), dy.size(0), dy.size(1));
  });
}

}  // namespace headroom
