// cudaMalloc segments. Compiled wherever nvcc is found; exercised only on a
// machine with a GPU (see bench/RESULTS.md for the device checks).
#include <cuda_runtime.h>

#include "memory/segment_source.h"
#include "util/error.h"

namespace headroom {

namespace {

class CudaSource final : public SegmentSource {
 public:
  void* map(uint64_t bytes) override {
    void* address = nullptr;
    cudaError_t status = cudaMalloc(&address, bytes);
    if (status == cudaErrorMemoryAllocation) {
      // Clear the sticky-free error so the retry after releasing the cache
      // (and the postmortem's own allocations) start clean.
      (void)cudaGetLastError();
      return nullptr;
    }
    if (status != cudaSuccess)
      throw InternalError(std::string("cudaMalloc(") + std::to_string(bytes) +
                          "): " + cudaGetErrorString(status));
    return address;
  }
  void unmap(void* address, uint64_t /*bytes*/) override {
    cudaError_t status = cudaFree(address);
    if (status != cudaSuccess)
      throw InternalError(std::string("cudaFree: ") + cudaGetErrorString(status));
  }
  std::string_view name() const override { return "cuda"; }
  bool is_host_accessible() const override { return false; }
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override {
    size_t free_now = 0, total = 0;
    if (cudaMemGetInfo(&free_now, &total) != cudaSuccess) {
      (void)cudaGetLastError();  // a postmortem without the figures, not a second error
      return false;
    }
    *free_bytes = free_now;
    *total_bytes = total;
    return true;
  }
};

class PinnedHostSource final : public SegmentSource {
 public:
  void* map(uint64_t bytes) override {
    void* address = nullptr;
    cudaError_t status = cudaHostAlloc(&address, bytes, cudaHostAllocDefault);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    if (status != cudaSuccess)
      throw InternalError(std::string("cudaHostAlloc(") + std::to_string(bytes) +
                          "): " + cudaGetErrorString(status));
    return address;
  }
  void unmap(void* address, uint64_t /*bytes*/) override {
    cudaError_t status = cudaFreeHost(address);
    if (status != cudaSuccess)
      throw InternalError(std::string("cudaFreeHost: ") + cudaGetErrorString(status));
  }
  std::string_view name() const override { return "cuda_pinned_host"; }
  bool is_host_accessible() const override { return true; }
};

}  // namespace

std::unique_ptr<SegmentSource> make_cuda_source() {
  return std::make_unique<CudaSource>();
}

std::unique_ptr<SegmentSource> make_pinned_host_source() {
  return std::make_unique<PinnedHostSource>();
}

}  // namespace headroom
