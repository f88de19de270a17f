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
// clone, and where it has no zmm write the lanes out (swiglu.cc).
//
// An OpenMP region is outlined into a function of its own that a clone does
// not cover, so a cloned function is the body of a parallel loop, never the
// function holding the pragma: for_each_thread_range splits the work and
// calls it once per thread.
#pragma once

#include <omp.h>

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
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
