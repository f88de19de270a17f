// The allocator every byte of device (or cpu-backend) memory goes through.
//
// Each block carries a category and a tag, and is stamped with the phase,
// layer and step in which it was asked for. The allocator keeps live and peak
// bytes per category and per phase, current and peak allocated/reserved, and
// reports every alloc/free/segment event to its observers (the trace).
//
// Policies (docs/allocator.md states each rule and the test that checks it):
//  - kExact: one segment per block, of exactly the requested bytes (aligned to
//    the source's granularity only in address, never in accounting); freeing
//    the block returns the segment. allocated == reserved at every moment.
//  - kCaching: PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator):
//    sizes rounded up to 512 B; requests <= 1 MiB come from a small pool carved
//    out of 2 MiB segments; larger requests from a large pool whose segments
//    are 20 MiB for requests under 10 MiB and the request rounded up to 2 MiB
//    otherwise; best-fit reuse of free cached blocks (smallest that fits;
//    ties: oldest segment, then lowest offset); a free block is split when the remainder would
//    be >= 512 B (small pool) or > 1 MiB (large pool); freed blocks merge with
//    free neighbours in their segment; cached segments count as reserved; when
//    a segment cannot be had (source failure or capacity) every fully free
//    cached segment is released and the request retried once before OOM.
//
// Not thread-safe: one allocator per rank-device, used from the step loop.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memory/category.h"
#include "memory/event.h"
#include "memory/postmortem.h"
#include "memory/segment_source.h"

namespace headroom {

enum class AllocatorPolicy { kExact, kCaching };

struct AllocatorOptions {
  AllocatorPolicy policy = AllocatorPolicy::kCaching;
  // memory.device_capacity: reserved bytes may never exceed it. 0 = no limit
  // beyond what the source itself can give.
  uint64_t capacity = 0;
};

// What allocate() hands out. `id` identifies the block in free().
struct Allocation {
  void* address = nullptr;
  uint64_t bytes = 0;  // after rounding: what counts as allocated
  uint64_t id = 0;
};

// Live and peak figures. Peaks are since construction or the last reset_peaks().
struct MemoryStats {
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  std::array<uint64_t, kNumCategories> live_by_category{};
  std::array<uint64_t, kNumCategories> peak_by_category{};
  // Peak allocated/reserved observed while each phase was current.
  std::array<uint64_t, kNumPhases> peak_allocated_by_phase{};
  std::array<uint64_t, kNumPhases> peak_reserved_by_phase{};
  // live_by_category at the moment of peak_allocated: "what the peak was made of".
  std::array<uint64_t, kNumCategories> by_category_at_peak{};
  // live_by_category at the last reset_peaks() (a step's start): what an OOM
  // is compared with to say which category grew.
  std::array<uint64_t, kNumCategories> live_by_category_at_reset{};
  uint64_t num_allocs = 0;          // since construction
  uint64_t num_segment_allocs = 0;  // since construction
};

// Caching-policy constants, named as in PyTorch.
inline constexpr uint64_t kMinBlockSize = 512;
inline constexpr uint64_t kSmallSize = 1 << 20;       // largest small-pool request
inline constexpr uint64_t kSmallBuffer = 2 << 20;     // small-pool segment
inline constexpr uint64_t kLargeBuffer = 20 << 20;    // segment for 1–10 MiB requests
inline constexpr uint64_t kMinLargeAlloc = 10 << 20;  // from here, round to kRoundLarge
inline constexpr uint64_t kRoundLarge = 2 << 20;

class Allocator {
 public:
  Allocator(std::unique_ptr<SegmentSource> source, AllocatorOptions options);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Returns a block of at least `bytes` (0 is allowed and yields a 0-byte
  // block with no address). Throws OutOfMemory, after releasing the cache and
  // retrying, when it cannot be had. `description` only feeds the postmortem.
  Allocation allocate(uint64_t bytes, Category category, std::string_view tag,
                      std::string_view description = {});
  // Returns a block. Under kCaching the memory stays reserved until
  // empty_cache() or an OOM retry releases its segment.
  void free(const Allocation& allocation);
  // Releases every cached segment that holds no live block.
  void empty_cache();

  // Context stamped on subsequent allocations. The trainer sets these; use
  // the scopes below so they are restored on every exit path.
  void set_phase(Phase phase) { phase_ = phase; }
  void set_layer(int32_t layer) { layer_ = layer; }
  void set_step(int64_t step) { step_ = step; }
  Phase phase() const { return phase_; }
  int32_t layer() const { return layer_; }
  int64_t step() const { return step_; }

  const MemoryStats& stats() const { return stats_; }
  uint64_t allocated() const { return stats_.allocated; }
  uint64_t reserved() const { return stats_.reserved; }
  uint64_t peak_allocated() const { return stats_.peak_allocated; }
  uint64_t peak_reserved() const { return stats_.peak_reserved; }
  uint64_t peak(Category category) const;
  uint64_t live(Category category) const;
  // Peaks (overall, per category, per phase) restart from the current values.
  void reset_peaks();

  uint64_t capacity() const { return options_.capacity; }
  AllocatorPolicy policy() const { return options_.policy; }
  const SegmentSource& source() const { return *source_; }

  // Tags are interned: events carry tag ids, the trace stores the table once.
  uint32_t intern_tag(std::string_view tag);
  const std::vector<std::string>& tags() const { return tags_; }

  // Live blocks, largest first (ties: older first), at most `limit`.
  std::vector<LiveBlock> largest_live_blocks(size_t limit) const;
  // The live blocks grouped by tag pattern (tag_pattern) and category, the
  // `limit` largest groups first.
  std::vector<LiveGroup> live_groups(size_t limit) const;
  size_t num_live_blocks() const { return blocks_by_id_.size(); }
  size_t num_segments() const { return segments_.size(); }

  // Observers are told every event in order; they must outlive the allocator
  // or be removed first.
  void add_observer(MemoryObserver* observer);
  void remove_observer(MemoryObserver* observer);

  // The rounded size kCaching would account for `bytes` (PyTorch's round_size).
  static uint64_t round_size(uint64_t bytes);
  // The segment size kCaching would reserve for a rounded request.
  static uint64_t segment_size_for(uint64_t rounded_bytes);

 private:
  struct Segment;
  struct Block {
    uint64_t id = 0;  // 0 while free
    char* address = nullptr;
    uint64_t size = 0;
    bool small_pool = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    Segment* segment = nullptr;
    // Stamped at allocation.
    uint64_t requested = 0;
    uint32_t tag_id = 0;
    Category category = Category::kWorkspace;
    Phase phase = Phase::kInit;
    int32_t layer = -1;
    int64_t step = -1;
  };
  struct Segment {
    uint64_t serial = 0;  // creation order: orders segments without looking at addresses
    char* address = nullptr;
    uint64_t size = 0;
    bool small_pool = false;
    Block* first = nullptr;
    uint64_t live_blocks = 0;
  };
  // Best fit: smallest size; ties go to the oldest segment, then the lowest
  // offset in it. PyTorch breaks ties by raw address; host, cuda and virtual
  // addresses are ordered differently, so that would let plan and run pick
  // different blocks. Segment age and offset are the same on every source.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const {
      if (a->size != b->size) return a->size < b->size;
      if (a->segment->serial != b->segment->serial) return a->segment->serial < b->segment->serial;
      return a->address < b->address;
    }
  };
  using Pool = std::set<Block*, BlockOrder>;

  Allocation allocate_exact(uint64_t bytes, Category category, uint32_t tag_id,
                            std::string_view description);
  Allocation allocate_caching(uint64_t bytes, Category category, uint32_t tag_id,
                              std::string_view description);
  // Reserves a segment within capacity, or nullptr.
  Segment* try_map_segment(uint64_t bytes, bool small_pool, Category category, uint32_t tag_id);
  void unmap_segment(Segment* segment);
  void release_cached_segments();
  Block* take_free_block(Pool& pool, uint64_t size);
  Block* new_block();  // a zeroed Block, recycled from spare_ when possible
  Allocation hand_out(Block* block, uint64_t requested, Category category, uint32_t tag_id);
  [[noreturn]] void raise_oom(uint64_t requested, uint64_t rounded, uint64_t segment_bytes,
                              Category category, uint32_t tag_id, std::string_view description);
  void account_alloc(uint64_t bytes, Category category);
  void account_free(uint64_t bytes, Category category);
  void account_reserve(int64_t delta);
  void emit(MemoryAction action, uint64_t bytes, const void* address, Category category,
            uint32_t tag_id);

  std::unique_ptr<SegmentSource> source_;
  AllocatorOptions options_;
  MemoryStats stats_;
  Phase phase_ = Phase::kInit;
  int32_t layer_ = -1;
  int64_t step_ = -1;
  uint64_t next_id_ = 1;
  uint64_t next_seq_ = 0;
  uint64_t next_segment_serial_ = 0;
  std::chrono::steady_clock::time_point start_;

  std::vector<std::string> tags_;
  std::unordered_map<std::string, uint32_t> tag_ids_;

  std::unordered_map<uint64_t, Block*> blocks_by_id_;
  std::map<const char*, std::unique_ptr<Segment>> segments_;
  std::vector<std::unique_ptr<Block>> block_storage_;  // owns every Block; recycled via spare_
  std::vector<Block*> spare_;
  Pool small_pool_;
  Pool large_pool_;
  std::vector<MemoryObserver*> observers_;
};

// Sets the allocator's phase (and optionally layer) for a scope.
class PhaseScope {
 public:
  PhaseScope(Allocator& allocator, Phase phase, int32_t layer = -1)
      : allocator_(allocator), saved_phase_(allocator.phase()), saved_layer_(allocator.layer()) {
    allocator.set_phase(phase);
    allocator.set_layer(layer);
  }
  ~PhaseScope() {
    allocator_.set_phase(saved_phase_);
    allocator_.set_layer(saved_layer_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Allocator& allocator_;
  Phase saved_phase_;
  int32_t saved_layer_;
};

}  // namespace headroom
