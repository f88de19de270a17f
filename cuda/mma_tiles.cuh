// What the tensor-core flash attention kernels share
// (flash_attention_forward_mma.cu, flash_attention_backward_mma.cu): the
// m16n8k16 product per 16-bit operand type, and the copies of 64-row tiles
// into shared memory, row-major (cp.async) or transposed (through
// registers), so that every operand fragment is one 32-bit shared load
// (mma_fragments.h says which element each lane holds). nvcc only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace headroom::cuda::mma {

// Both kernels' blocks: 4 warps, each owning 16 rows of a 64-row tile.
constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kTile = 16 * kWarps;
constexpr int kPad = 8;  // halves past each shared row: a fragment load's 8 rows on distinct banks

// The tensor-core operand type of a storage type.
template <typename T>
struct Operand;
template <>
struct Operand<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t pair) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pair));
  }
  // d += a b: the product of one m16n8k16 tile.
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Operand<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t pair) {
    return __half22float2(*reinterpret_cast<const __half2*>(&pair));
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// The two 16-bit elements at `p` (4-byte aligned) as one register.
__device__ __forceinline__ uint32_t load_pair(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// dst[r][c] (rows `ld` halves apart, c < kD) = src row r0 + r for r < valid,
// zeros after, through cp.async in 16-byte pieces; the caller commits and
// waits. src points at the head's first column; rows are `stride` elements
// apart, a multiple of 8 (16-byte aligned, as the launcher checks).
template <int kRows, int kD>
__device__ __forceinline__ void copy_tile_async(uint16_t* dst, int ld, const uint16_t* src,
                                                int64_t stride, int64_t r0, int64_t valid) {
  constexpr int kPieces = kD / 8;
  for (int e = threadIdx.x; e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = (e % kPieces) * 8;
    const uint32_t to = static_cast<uint32_t>(__cvta_generic_to_shared(dst + r * ld + c));
    // Past the last row nothing is read (size 0) and 16 zero bytes land.
    const uint16_t* from = r < valid ? src + (r0 + r) * stride + c : src;
    const int bytes = r < valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from),
                 "r"(bytes));
  }
}

__device__ __forceinline__ void wait_async_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// vt[c][r] (rows `ld` halves apart) = src row r0 + r, column c, for
// r < valid; 0 after.
template <int kRows, int kD>
__device__ __forceinline__ void copy_tile_transposed(uint16_t* vt, int ld, const uint16_t* src,
                                                     int64_t stride, int64_t r0, int64_t valid) {
  constexpr int kPieces = kD / 8;
  for (int e = threadIdx.x; e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = (e % kPieces) * 8;
    uint4 piece = make_uint4(0, 0, 0, 0);
    if (r < valid) piece = *reinterpret_cast<const uint4*>(src + (r0 + r) * stride + c);
    const uint16_t* halves = reinterpret_cast<const uint16_t*>(&piece);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      vt[(c + i) * ld + r] = halves[i];
  }
}

}  // namespace headroom::cuda::mma
