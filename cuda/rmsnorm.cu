// rmsnorm (cpu/rmsnorm.cc's numerics): forward y = x * rstd * w row by row,
// rstd = 1 / sqrt(mean(x^2) + eps); backward, with r = rstd[n], g = dy * w:
//   dx[n, i] = r * g[i] - x[n, i] * r^3 / C * sum_j g[j] x[n, j]   (written)
//   dw[i]   += sum_n dy[n, i] * x[n, i] * r                        (accumulated)
// Row sums (the mean square, the dot) and dw's column sums are in double;
// everything elementwise is fp32 with each product rounded as written (the
// _rn intrinsics keep nvcc from contracting into FMAs the cpu does not
// have), and bf16 / fp16 are rounded once on store.
//
// Row kernels: one block per row, a fixed tree over the block's threads.
// dw: block x owns kColumns columns; its kGroups thread rows each sum one
// fixed range of rows in order (boundaries depend only on N), and the
// ranges' sums are added in range order by the column's first thread, so
// dw is deterministic and no thread writes another's element. Its order
// differs from cpu's one pass over all rows, by double rounding only.
#include <cstdint>

#include "kernels_rows.h"

namespace headroom::cuda {

namespace {

using rows::block_sum;
using rows::grid_for;
using rows::store;
using rows::widen;

constexpr int kRowThreads = 256;
constexpr int kColumns = 32;  // dw columns per block: one warp, coalesced
constexpr int kGroups = 32;   // dw row ranges per block

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    forward_kernel(const T* x, const T* w, float eps, T* y, float* rstd, int64_t rows,
                   int64_t width) {
  __shared__ double shared[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* xr = x + n * width;
    double sum = 0;
    for (int64_t c = threadIdx.x; c < width; c += kRowThreads) {
      const double v = widen(xr[c]);
      sum += v * v;  // exact, so an FMA here changes nothing
    }
    const double mean_square = block_sum(sum, shared) / static_cast<double>(width);
    const float r = static_cast<float>(1.0 / sqrt(mean_square + static_cast<double>(eps)));
    if (threadIdx.x == 0) rstd[n] = r;
    T* yr = y + n * width;
    for (int64_t c = threadIdx.x; c < width; c += kRowThreads)
      store(yr + c, __fmul_rn(__fmul_rn(widen(xr[c]), r), widen(w[c])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    input_gradient_kernel(const T* dy, const T* x, const T* w, const float* rstd, T* dx,
                          int64_t rows, int64_t width) {
  __shared__ double shared[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* dyr = dy + n * width;
    const T* xr = x + n * width;
    double dot = 0;  // sum_j dy[j] x[j] w[j]
    for (int64_t c = threadIdx.x; c < width; c += kRowThreads) {
      const double product =
          __dmul_rn(__dmul_rn(widen(dyr[c]), widen(xr[c])), static_cast<double>(widen(w[c])));
      dot = __dadd_rn(dot, product);
    }
    dot = block_sum(dot, shared);
    const double r = rstd[n];
    const auto coefficient = static_cast<float>(r * r * r * dot / static_cast<double>(width));
    const auto rf = static_cast<float>(r);
    T* dxr = dx + n * width;
    for (int64_t c = threadIdx.x; c < width; c += kRowThreads) {
      const float g = __fmul_rn(widen(dyr[c]), widen(w[c]));
      store(dxr + c, __fsub_rn(__fmul_rn(rf, g), __fmul_rn(coefficient, widen(xr[c]))));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kColumns* kGroups)
    weight_gradient_kernel(const T* dy, const T* x, const float* rstd, T* dw, int64_t rows,
                           int64_t width) {
  __shared__ double partial[kGroups][kColumns + 1];
  const int64_t begin = rows * threadIdx.y / kGroups, end = rows * (threadIdx.y + 1) / kGroups;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(kColumns); c0 < width;
       c0 += static_cast<int64_t>(gridDim.x) * kColumns) {
    const int64_t c = c0 + threadIdx.x;
    double sum = 0;
    if (c < width)
      for (int64_t n = begin; n < end; ++n) {
        const double product =
            __dmul_rn(__dmul_rn(widen(dy[n * width + c]), widen(x[n * width + c])), rstd[n]);
        sum = __dadd_rn(sum, product);
      }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < width) {
      double total = 0;
      for (int g = 0; g < kGroups; ++g)
        total += partial[g][threadIdx.x];
      store(dw + c, static_cast<float>(static_cast<double>(widen(dw[c])) + total));
    }
    __syncthreads();  // partial is rewritten by the next column block
  }
}

template <typename T>
cudaError_t forward(const T* x, const T* w, float eps, T* y, float* rstd, int64_t rows,
                    int64_t width, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  forward_kernel<<<grid_for(rows), kRowThreads, 0, stream>>>(x, w, eps, y, rstd, rows, width);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward(const T* dy, const T* x, const T* w, const float* rstd, T* dx, T* dw,
                     int64_t rows, int64_t width, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;  // dw += an empty sum
  input_gradient_kernel<<<grid_for(rows), kRowThreads, 0, stream>>>(dy, x, w, rstd, dx, rows,
                                                                    width);
  if (dw != nullptr)  // null: a frozen weight
    weight_gradient_kernel<<<grid_for(width, kColumns), dim3(kColumns, kGroups), 0, stream>>>(
        dy, x, rstd, dw, rows, width);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm_forward_f32(const float* x, const float* w, float eps, float* y, float* rstd,
                                int64_t rows, int64_t width, cudaStream_t stream) {
  return forward(x, w, eps, y, rstd, rows, width, stream);
}

cudaError_t rmsnorm_forward_bf16(const uint16_t* x, const uint16_t* w, float eps, uint16_t* y,
                                 float* rstd, int64_t rows, int64_t width, cudaStream_t stream) {
  using T = __nv_bfloat16;
  return forward(reinterpret_cast<const T*>(x), reinterpret_cast<const T*>(w), eps,
                 reinterpret_cast<T*>(y), rstd, rows, width, stream);
}

cudaError_t rmsnorm_forward_f16(const uint16_t* x, const uint16_t* w, float eps, uint16_t* y,
                                float* rstd, int64_t rows, int64_t width, cudaStream_t stream) {
  using T = __half;
  return forward(reinterpret_cast<const T*>(x), reinterpret_cast<const T*>(w), eps,
                 reinterpret_cast<T*>(y), rstd, rows, width, stream);
}

cudaError_t rmsnorm_backward_f32(const float* dy, const float* x, const float* w, const float* rstd,
                                 float* dx, float* dw, int64_t rows, int64_t width,
                                 cudaStream_t stream) {
  return backward(dy, x, w, rstd, dx, dw, rows, width, stream);
}

cudaError_t rmsnorm_backward_bf16(const uint16_t* dy, const uint16_t* x, const uint16_t* w,
                                  const float* rstd, uint16_t* dx, uint16_t* dw, int64_t rows,
                                  int64_t width, cudaStream_t stream) {
  using T = __nv_bfloat16;
  return backward(reinterpret_cast<const T*>(dy), reinterpret_cast<const T*>(x),
                  reinterpret_cast<const T*>(w), rstd, reinterpret_cast<T*>(dx),
                  reinterpret_cast<T*>(dw), rows, width, stream);
}

cudaError_t rmsnorm_backward_f16(const uint16_t* dy, const uint16_t* x, const uint16_t* w,
                                 const float* rstd, uint16_t* dx, uint16_t* dw, int64_t rows,
                                 int64_t width, cudaStream_t stream) {
  using T = __half;
  return backward(reinterpret_cast<const T*>(dy), reinterpret_cast<const T*>(x),
                  reinterpret_cast<const T*>(w), rstd, reinterpret_cast<T*>(dx),
                  reinterpret_cast<T*>(dw), rows, width, stream);
}

}  // namespace headroom::cuda
