// copy_from_host: dst[:] = the dst.nbytes() bytes at src (any dtype).
// copy_to_host: the src.nbytes() bytes of src to dst.
// The host buffer must not overlap the tensor. A null host pointer is
// accepted only for a 0-byte tensor.
// Allocates: nothing.
#include <cstring>

#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

// Chunks of 1 MiB, as copy does: large enough for memcpy to run at full
// speed, small enough to spread a weight load over every core.
void parallel_memcpy(void* dst, const void* src, uint64_t nbytes) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  auto* to = static_cast<char*>(dst);
  const auto* from = static_cast<const char*>(src);
  int64_t bytes = static_cast<int64_t>(nbytes);
  int64_t chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t i = 0; i < chunks; ++i) {
    int64_t begin = i * kChunk;
    int64_t size = begin + kChunk <= bytes ? kChunk : bytes - begin;
    std::memcpy(to + begin, from + begin, static_cast<size_t>(size));
  }
}

}  // namespace

void CpuKernels::copy_from_host(const void* src, Tensor& dst) {
  parallel_memcpy(dst.raw(), src, dst.nbytes());
}

void CpuKernels::copy_to_host(const Tensor& src, void* dst) {
  parallel_memcpy(dst, src.raw(), src.nbytes());
}

}  // namespace headroom
