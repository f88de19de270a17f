#include "memory/segment_source.h"

#include <new>

namespace headroom {

namespace {

// 4096 keeps oneDNN's and AVX-512's preference for page/cache-line alignment.
constexpr std::align_val_t kHostAlignment{4096};

class HostSource final : public SegmentSource {
 public:
  void* map(uint64_t bytes) override { return ::operator new(bytes, kHostAlignment, std::nothrow); }
  void unmap(void* address, uint64_t /*bytes*/) override {
    ::operator delete(address, kHostAlignment);
  }
  std::string_view name() const override { return "host"; }
  bool is_host_accessible() const override { return true; }
};

class VirtualSource final : public SegmentSource {
 public:
  void* map(uint64_t bytes) override {
    // Start far from zero so a stray dereference faults loudly; keep 4 KiB
    // alignment and a gap so adjacent segments never look contiguous.
    uint64_t address = next_;
    next_ += (bytes + 2 * 4096 - 1) / 4096 * 4096;
    return reinterpret_cast<void*>(address);
  }
  void unmap(void* /*address*/, uint64_t /*bytes*/) override {}
  std::string_view name() const override { return "meta"; }
  bool is_host_accessible() const override { return false; }

 private:
  uint64_t next_ = uint64_t{1} << 44;
};

}  // namespace

std::unique_ptr<SegmentSource> make_host_source() {
  return std::make_unique<HostSource>();
}
std::unique_ptr<SegmentSource> make_virtual_source() {
  return std::make_unique<VirtualSource>();
}

}  // namespace headroom
