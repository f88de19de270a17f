// 16-lane fp32 tile products (see attention_wide_fma.h): attention_kernels.h's
// tile_gemm at 16 lanes, in the one function here compiled for x86-64-v4.
#include "backend/cpu/attention_wide_fma.h"

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_switch.h"

// 64-byte vectors are passed between always-inlined helpers only (see
// attention_kernels.h): no call with the differing ABI exists.
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HR_WIDE_FMA_TARGET __attribute__((target("arch=x86-64-v4")))
#define HR_HAVE_WIDE_FMA_TARGET 1
#else
#define HR_WIDE_FMA_TARGET
#define HR_HAVE_WIDE_FMA_TARGET 0
#endif

namespace headroom::attention_cpu {

bool have_wide_fma() {
#if HR_HAVE_WIDE_FMA_TARGET && !HEADROOM_CPU_AVX2_ONLY
  static const bool have = [] {
    // HEADROOM_CPU_WIDE_FMA=0 keeps the 8-lane products on a CPU with
    // AVX-512.
    if (cpu_path_switched_off("HEADROOM_CPU_WIDE_FMA")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v4") != 0;
  }();
  return have;
#else
  return false;
#endif
}

// tile_gemm's code at 16 lanes, compiled for AVX-512.
HR_WIDE_FMA_TARGET void tile_gemm_wide(int64_t m, int64_t n, int64_t k, const float* a,
                                       int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                                       float* c, int64_t ldc, bool accumulate) {
  tile_gemm<16>(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

}  // namespace headroom::attention_cpu
