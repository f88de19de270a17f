// bias_forward: x[t, c] += bias[c] in place, x (rows, width) row-major (16-bit:
// added in fp32, rounded once, as cpu/bias.cc).
// bias_backward: d_bias[c] += sum over t of dy[t, c], the cpu's sum exactly:
// one thread per column walks the rows in order with a double accumulator
// that starts at +0, and d_bias[c] becomes float(double(d_bias[c]) + sum),
// rounded once more into a 16-bit d_bias. No atomics and no split of the rows,
// so the same bits every run and on either backend. The columns are few
// (Qwen2's q/k/v biases: a few thousand), so each thread keeps eight rows'
// loads in flight rather than waiting on one at a time.
#include "kernels_elementwise.h"

namespace headroom::cuda {

namespace {

constexpr int kBackwardThreads = 64;  // small blocks: few columns reach more SMs
constexpr int kRowsInFlight = 8;

template <typename E>
__global__ void bias_forward_kernel(typename E::Storage* x, const typename E::Storage* bias,
                                    int64_t rows, int64_t width) {
  for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    typename E::Storage* row = x + t * width;
    for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < width;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
      row[c] = E::store(E::load(row[c]) + E::load(bias[c]));
  }
}

template <typename E>
__global__ void bias_backward_kernel(const typename E::Storage* dy, typename E::Storage* d_bias,
                                     int64_t rows, int64_t width) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < width;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const typename E::Storage* column = dy + c;
    double sum = 0.0;
    int64_t t = 0;
    for (; t + kRowsInFlight <= rows; t += kRowsInFlight) {
      float v[kRowsInFlight];
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k)
        v[k] = E::load(column[(t + k) * width]);
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k)
        sum += static_cast<double>(v[k]);
    }
    for (; t < rows; ++t)
      sum += static_cast<double>(E::load(column[t * width]));
    d_bias[c] = E::store(static_cast<float>(static_cast<double>(E::load(d_bias[c])) + sum));
  }
}

template <typename E>
cudaError_t launch_bias_forward(typename E::Storage* x, const typename E::Storage* bias,
                                int64_t rows, int64_t width, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaSuccess;
  // Columns across grid.x, rows across grid.y (both grid-stride), about 8192
  // blocks in all: no per-element division to find the column.
  int64_t column_blocks = (width + kElementwiseThreads - 1) / kElementwiseThreads;
  if (column_blocks > 65535) column_blocks = 65535;
  int64_t row_blocks = 8192 / column_blocks;
  if (row_blocks < 1) row_blocks = 1;
  if (row_blocks > rows) row_blocks = rows;
  if (row_blocks > 65535) row_blocks = 65535;
  dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(row_blocks));
  bias_forward_kernel<E><<<grid, kElementwiseThreads, 0, stream>>>(x, bias, rows, width);
  return cudaGetLastError();
}

template <typename E>
cudaError_t launch_bias_backward(const typename E::Storage* dy, typename E::Storage* d_bias,
                                 int64_t rows, int64_t width, cudaStream_t stream) {
  // rows == 0 still runs: the cpu rewrites d_bias as d_bias + 0.0 (-0 -> +0).
  if (width <= 0) return cudaSuccess;
  int64_t blocks = (width + kBackwardThreads - 1) / kBackwardThreads;
  if (blocks > 65535) blocks = 65535;
  bias_backward_kernel<E>
      <<<static_cast<int>(blocks), kBackwardThreads, 0, stream>>>(dy, d_bias, rows, width);
  return cudaGetLastError();
}

}  // namespace

cudaError_t bias_forward_f32(float* x, const float* bias, int64_t rows, int64_t width,
                             cudaStream_t stream) {
  return launch_bias_forward<ElementF32>(x, bias, rows, width, stream);
}

cudaError_t bias_forward_bf16(uint16_t* x, const uint16_t* bias, int64_t rows, int64_t width,
                              cudaStream_t stream) {
  return launch_bias_forward<ElementBF16>(x, bias, rows, width, stream);
}

cudaError_t bias_forward_f16(uint16_t* x, const uint16_t* bias, int64_t rows, int64_t width,
                             cudaStream_t stream) {
  return launch_bias_forward<ElementF16>(x, bias, rows, width, stream);
}

cudaError_t bias_backward_f32(const float* dy, float* d_bias, int64_t rows, int64_t width,
                              cudaStream_t stream) {
  return launch_bias_backward<ElementF32>(dy, d_bias, rows, width, stream);
}

cudaError_t bias_backward_bf16(const uint16_t* dy, uint16_t* d_bias, int64_t rows, int64_t width,
                               cudaStream_t stream) {
  return launch_bias_backward<ElementBF16>(dy, d_bias, rows, width, stream);
}

cudaError_t bias_backward_f16(const uint16_t* dy, uint16_t* d_bias, int64_t rows, int64_t width,
                              cudaStream_t stream) {
  return launch_bias_backward<ElementF16>(dy, d_bias, rows, width, stream);
}

}  // namespace headroom::cuda
