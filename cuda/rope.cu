// rope: rotary embedding in place, Hugging Face Llama's "rotate_half"
// (cpu/rope.cc). x (T, n * D) as (T, n, D); for token t, head h, i < D/2,
// with a = x[t, h, i], b = x[t, h, i + D/2]:
//   x[t, h, i]       = a * cos(angle) - b * sin(angle)
//   x[t, h, i + D/2] = b * cos(angle) + a * sin(angle)
// with sin negated (sign -1) for the backward (the transpose).
//
// Angles exactly as cpu computes them, which is Hugging Face's fp32 angle:
//   inv_freq[i] = 1 / float(pow(double(theta), double(float(2i) / float(D))))
//   angle       = float(position) * inv_freq[i]   (fp32)
// and cos / sin of that fp32 angle evaluated in double and rounded to fp32
// once. The _rn intrinsics keep every fp32 step rounded as written (no FMA
// contraction, no approximate division). CUDA's double pow is within 2 ulp
// of double, so the rounded fp32 power is glibc's but in the rare case of a
// double result within a few ulps of an fp32 rounding boundary.
//
// cos / sin are not CUDA's cos() / sin() of the double angle: their
// reduction of a large argument (Payne-Hanek) keeps a table in local
// memory, which this build refuses. sincos_of below reduces exactly instead:
// angle / pi from a three-part 1/pi, then sincospi (no slow path) and the
// sign of the half turns. Absolute error ~2^-51, as a double sin of an
// argument in [-pi, pi] has; so again cpu's fp32 values but in rare
// boundary cases.
//
// One block per token, one thread per frequency i: each thread computes its
// angle once and rotates that pair in every head, so the double-precision
// math is per (token, i), not per element. Elements are read and written by
// their one thread, so in place is safe.
#include <cstdint>

#include "kernels_rows.h"

namespace headroom::cuda {

namespace {

using rows::grid_for;
using rows::store;
using rows::widen;

constexpr int kMaxThreads = 256;

// 1/pi = kInvPi1 + kInvPi2 + kInvPi3 to ~2^-110: the first two have 26
// significant bits, so their products with an fp32 (24-bit) angle are exact.
constexpr double kInvPi1 = 0x1.45f307p-2;
constexpr double kInvPi2 = -0x1.1b1bbe8p-29;
constexpr double kInvPi3 = -0x1.6b01ec5417056p-56;

// sin and cos of an fp32 angle in double. angle / pi = n + f with n an
// integer and f carried in double: p1 - rint(p1) and p2 - rint(p2) are exact
// (each p has at most 50 bits), so f's only errors are two roundings near 1
// and p3's ~2^-76; then sin(angle) = (-1)^n sinpi(f), and cos likewise.
__device__ __forceinline__ void sincos_of(float angle, double* sin_out, double* cos_out) {
  const double a = angle;
  const double p1 = __dmul_rn(a, kInvPi1), p2 = __dmul_rn(a, kInvPi2);
  const double p3 = __dmul_rn(a, kInvPi3);
  const double n1 = rint(p1), n2 = rint(p2);
  const double f = __dadd_rn(__dadd_rn(__dsub_rn(p1, n1), __dsub_rn(p2, n2)), p3);
  double s, c;
  sincospi(f, &s, &c);
  const bool odd = ((static_cast<long long>(n1) + static_cast<long long>(n2)) & 1) != 0;
  *sin_out = odd ? -s : s;
  *cos_out = odd ? -c : c;
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    rope_kernel(T* x, const int32_t* positions, int64_t tokens, int64_t width, int64_t head_dim,
                float theta, float sign) {
  const int64_t half = head_dim / 2, heads = width / head_dim;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const auto position = static_cast<float>(positions[t]);
    T* row = x + t * width;
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const float exponent = __fdiv_rn(static_cast<float>(2 * i), static_cast<float>(head_dim));
      const auto power =
          static_cast<float>(pow(static_cast<double>(theta), static_cast<double>(exponent)));
      const float angle = __fmul_rn(position, __fdiv_rn(1.0f, power));
      double sin_angle, cos_angle;
      sincos_of(angle, &sin_angle, &cos_angle);
      const auto c = static_cast<float>(cos_angle);
      const float s = sign * static_cast<float>(sin_angle);
      for (int64_t h = 0; h < heads; ++h) {
        T* first = row + h * head_dim + i;
        T* second = first + half;
        const float a = widen(*first), b = widen(*second);
        store(first, __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
        store(second, __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
      }
    }
  }
}

template <typename T>
cudaError_t rope(T* x, const int32_t* positions, int64_t tokens, int64_t width, int64_t head_dim,
                 float theta, float sign, cudaStream_t stream) {
  const int64_t half = head_dim / 2;
  if (tokens == 0 || width == 0 || half == 0) return cudaSuccess;
  // One thread per frequency up to kMaxThreads (64 at D = 128), whole warps.
  const int64_t warps = (half + 31) / 32;
  const int threads = warps * 32 < kMaxThreads ? static_cast<int>(warps * 32) : kMaxThreads;
  rope_kernel<<<grid_for(tokens), threads, 0, stream>>>(x, positions, tokens, width, head_dim,
                                                        theta, sign);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rope_f32(float* x, const int32_t* positions, int64_t tokens, int64_t width,
                     int64_t head_dim, float theta, float sign, cudaStream_t stream) {
  return rope(x, positions, tokens, width, head_dim, theta, sign, stream);
}

cudaError_t rope_bf16(uint16_t* x, const int32_t* positions, int64_t tokens, int64_t width,
                      int64_t head_dim, float theta, float sign, cudaStream_t stream) {
  return rope(reinterpret_cast<__nv_bfloat16*>(x), positions, tokens, width, head_dim, theta, sign,
              stream);
}

cudaError_t rope_f16(uint16_t* x, const int32_t* positions, int64_t tokens, int64_t width,
                     int64_t head_dim, float theta, float sign, cudaStream_t stream) {
  return rope(reinterpret_cast<__half*>(x), positions, tokens, width, head_dim, theta, sign,
              stream);
}

}  // namespace headroom::cuda
