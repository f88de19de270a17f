// Compiling the cpu kernels' inner loops for the machine they run on, while
// the binary stays baseline x86-64 so it runs anywhere.
//
// HR_CPU_CLONES on a function compiles it three times where the toolchain
// can: for x86-64-v4 (AVX-512: the AMX hosts and AVX-512 EPYCs), for
// x86-64-v3 (AVX2 + FMA, what every machine this project runs on has) and
// for the baseline; the dynamic loader picks one per process by the CPU, so
// every thread of a process runs the same clone and the bits never depend
// on the thread count. The AVX2 clone does 4-8 lanes at a time what the
// baseline does one element at a time (bf16 <-> fp32 conversions above all),
// and GCC contracts a * b + c into FMAs there (its default for C++, even as
// ISO C++20): one rounding instead of two, so a machine with AVX2 and one
// without differ in the last bits. No clone reassociates a sum, and v4
// contracts exactly where v3 does, so those two agree to the bit; v4 does 16
// lanes per instruction where the loop allows (bf16 swiglu and rmsnorm: 7.0
// -> 5.5 and 8.5 -> 7.0 ms per tiny step on an AVX-512 EPYC,
// bench/RESULTS.md). GCC does not find the 16 lanes in every bf16 loop
// (it sized swiglu's by the 16-bit data: 8 fp32 lanes); objdump the v4
// clone, and where it has no zmm write the lanes out in a v4 version (below;
// swiglu.cc).
//
// An OpenMP region is outlined into a function of its own that a clone does
// not cover, so a cloned function is the body of a parallel loop, never the
// function holding the pragma: for_each_thread_range splits the work and
// calls it once per thread.
#pragma once

#include <omp.h>

#include <cstdint>

// A loop written for 16 lanes in GCC vector types (64 bytes: one AVX-512
// register) is no clone: where the ISA has no 64-byte registers (the
// x86-64-v3 clone) GCC 12 lowers compares, `?:` and even the splitting of
// such vectors one lane at a time (vpextrd / vinsertps), and the AVX2 clone
// of swiglu's bf16 loops ran 10x slower than its fp32 ones so. Such a loop
// is a function versioned by target instead (GCC function multiversioning,
// chosen by the loader as the clones are): HR_CPU_V4_VERSION on the 16-lane
// body, under `#if HR_HAVE_CPU_V4_VERSION`, and HR_CPU_DEFAULT_VERSION on a
// version that does nothing and leaves the range to the cloned loop.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HR_CPU_DEFAULT_VERSION __attribute__((target("default")))
#define HR_CPU_V4_VERSION __attribute__((target("arch=x86-64-v4")))
#define HR_HAVE_CPU_V4_VERSION !HEADROOM_CPU_AVX2_ONLY
#else
#define HR_CPU_DEFAULT_VERSION
#define HR_CPU_V4_VERSION
#define HR_HAVE_CPU_V4_VERSION 0
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && HEADROOM_CPU_AVX2_ONLY
// The `avx2` preset (CMakeLists.txt): what an AVX2-only CPU runs, wherever.
#define HR_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HR_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HR_CPU_CLONES
#endif

namespace headroom {

// Calls body(begin, end) once per thread of the team over contiguous,
// near-equal parts of [0, n) (all of it on the calling thread when not
// `parallel`). What a part computes may not depend on where it starts.
template <typename Body>
void for_each_thread_range(int64_t n, bool parallel, Body&& body) {
#pragma omp parallel if (parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    if (begin < end) body(begin, end);
  }
}

}  // namespace headroom
