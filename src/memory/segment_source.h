// Where segments come from: the one place an allocator touches real memory.
//
// A source hands out whole segments and takes them back; it knows nothing of
// blocks, tags or policies. `map` returns nullptr when the memory is not there
// (the allocator then empties its cache, retries, and raises OutOfMemory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace headroom {

class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  // A segment of exactly `bytes`, aligned to at least 512 bytes, or nullptr.
  virtual void* map(uint64_t bytes) = 0;
  // Returns a segment obtained from map() with the same size.
  virtual void unmap(void* address, uint64_t bytes) = 0;
  // "host", "meta", "cuda": written into traces and postmortems.
  virtual std::string_view name() const = 0;
  // Whether addresses point at memory this process can read and write.
  virtual bool is_host_accessible() const = 0;
  // The device's free and total bytes as its driver counts them
  // (cudaMemGetInfo: other processes and the CUDA context included), for a
  // postmortem; false for sources with no such figures (host, meta).
  virtual bool device_memory(uint64_t* /*free_bytes*/, uint64_t* /*total_bytes*/) const {
    return false;
  }
};

// Host memory for the cpu backend: aligned operator new, every page written
// once when mapped, so a segment is resident (committed) from the start, like
// cudaMalloc'd memory, and the allocator's reserved bytes are what the
// operating system counts (segment_source.cc says why).
std::unique_ptr<SegmentSource> make_host_source();

// Virtual address space for the meta backend: addresses are invented from a
// counter and no memory is touched, so planning an 80 GiB run costs nothing.
// Addresses never repeat within one source and are never dereferenceable.
std::unique_ptr<SegmentSource> make_virtual_source();

}  // namespace headroom

#ifdef HEADROOM_HAVE_CUDA
namespace headroom {
// cudaMalloc/cudaFree on the current device. map() returns nullptr on
// cudaErrorMemoryAllocation (and clears that error) so the allocator can
// release its cache and retry, as PyTorch does.
std::unique_ptr<SegmentSource> make_cuda_source();
// Page-locked host memory (cudaHostAlloc/cudaFreeHost) for the cpu backend
// that holds a cuda run's offloaded optimizer: the copies between it and the
// device then go by DMA at the link's speed, with no staging through a
// driver bounce buffer (what pageable memory costs). Host-accessible, so the
// cpu kernels use it as they use make_host_source()'s. map() returns nullptr
// when the driver cannot lock that much (the allocator's OOM path names it).
std::unique_ptr<SegmentSource> make_pinned_host_source();
}  // namespace headroom
#endif
