// copy: dst[:] = src[:], same shape and dtype; src and dst are the same
// elements (a no-op) or disjoint (check_copy rejects partial overlap).
// Allocates: nothing.
#include <cstring>

#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"

namespace headroom {

void CpuKernels::copy(const Tensor& src, Tensor& dst) {
  if (src.raw() == dst.raw()) return;
  const char* from = static_cast<const char*>(src.raw());
  char* to = static_cast<char*>(dst.raw());
  // Chunks of 1 MiB: large enough for memcpy to run at full speed, small
  // enough to spread a big copy over every core.
  constexpr int64_t kChunk = int64_t{1} << 20;
  int64_t bytes = static_cast<int64_t>(src.nbytes());
  int64_t chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t i = 0; i < chunks; ++i) {
    int64_t begin = i * kChunk;
    int64_t size = begin + kChunk <= bytes ? kChunk : bytes - begin;
    std::memcpy(to + begin, from + begin, static_cast<size_t>(size));
  }
}

}  // namespace headroom
