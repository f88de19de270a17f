#include "memory/allocator.h"

#include <algorithm>
#include <map>

#include "util/bytes.h"
#include "util/error.h"

namespace headroom {

uint64_t Allocator::round_size(uint64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

uint64_t Allocator::segment_size_for(uint64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return (rounded_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

Allocator::Allocator(std::unique_ptr<SegmentSource> source, AllocatorOptions options)
    : source_(std::move(source)), options_(options), start_(std::chrono::steady_clock::now()) {
  HR_CHECK(source_ != nullptr, "allocator needs a segment source");
  intern_tag("");  // tag id 0: untagged
}

Allocator::~Allocator() {
  // Live blocks at destruction are a leak in the caller; their memory goes
  // back to the source regardless so the process stays clean.
  for (auto& [address, segment] : segments_)
    source_->unmap(segment->address, segment->size);
}

uint32_t Allocator::intern_tag(std::string_view tag) {
  auto it = tag_ids_.find(std::string(tag));
  if (it != tag_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(tags_.size());
  tags_.emplace_back(tag);
  tag_ids_.emplace(tags_.back(), id);
  return id;
}

void Allocator::add_observer(MemoryObserver* observer) {
  observers_.push_back(observer);
}

void Allocator::remove_observer(MemoryObserver* observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

void Allocator::emit(MemoryAction action, uint64_t bytes, const void* address, Category category,
                     uint32_t tag_id) {
  MemoryEvent event{};
  event.seq = next_seq_++;
  event.t_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start_)
                   .count();
  event.step = step_;
  event.action = action;
  event.bytes = bytes;
  event.address = reinterpret_cast<uint64_t>(address);
  event.category = category;
  event.tag_id = tag_id;
  event.phase = phase_;
  event.layer = layer_;
  for (MemoryObserver* observer : observers_)
    observer->on_memory_event(event);
}

uint64_t Allocator::peak(Category category) const {
  return stats_.peak_by_category[static_cast<int>(category)];
}

uint64_t Allocator::live(Category category) const {
  return stats_.live_by_category[static_cast<int>(category)];
}

void Allocator::reset_peaks() {
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
  stats_.peak_by_category = stats_.live_by_category;
  stats_.by_category_at_peak = stats_.live_by_category;
  stats_.live_by_category_at_reset = stats_.live_by_category;
  stats_.peak_allocated_by_phase.fill(0);
  stats_.peak_reserved_by_phase.fill(0);
  int p = static_cast<int>(phase_);
  stats_.peak_allocated_by_phase[p] = stats_.allocated;
  stats_.peak_reserved_by_phase[p] = stats_.reserved;
}

void Allocator::account_alloc(uint64_t bytes, Category category) {
  int c = static_cast<int>(category);
  int p = static_cast<int>(phase_);
  stats_.allocated += bytes;
  stats_.live_by_category[c] += bytes;
  stats_.peak_by_category[c] = std::max(stats_.peak_by_category[c], stats_.live_by_category[c]);
  if (stats_.allocated > stats_.peak_allocated) {
    stats_.peak_allocated = stats_.allocated;
    stats_.by_category_at_peak = stats_.live_by_category;
  }
  stats_.peak_allocated_by_phase[p] = std::max(stats_.peak_allocated_by_phase[p], stats_.allocated);
  ++stats_.num_allocs;
}

void Allocator::account_free(uint64_t bytes, Category category) {
  stats_.allocated -= bytes;
  stats_.live_by_category[static_cast<int>(category)] -= bytes;
}

void Allocator::account_reserve(int64_t delta) {
  stats_.reserved = static_cast<uint64_t>(static_cast<int64_t>(stats_.reserved) + delta);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  int p = static_cast<int>(phase_);
  stats_.peak_reserved_by_phase[p] = std::max(stats_.peak_reserved_by_phase[p], stats_.reserved);
}

Allocation Allocator::allocate(uint64_t bytes, Category category, std::string_view tag,
                               std::string_view description) {
  uint32_t tag_id = intern_tag(tag);
  if (bytes == 0) {
    // Empty tensors are legal (a rank with no padding, a zero-length chunk);
    // they own nothing and produce no events.
    return Allocation{};
  }
  if (options_.policy == AllocatorPolicy::kExact)
    return allocate_exact(bytes, category, tag_id, description);
  return allocate_caching(bytes, category, tag_id, description);
}

Allocator::Segment* Allocator::try_map_segment(uint64_t bytes, bool small_pool, Category category,
                                               uint32_t tag_id) {
  if (options_.capacity != 0 && stats_.reserved + bytes > options_.capacity) return nullptr;
  void* address = source_->map(bytes);
  if (address == nullptr) return nullptr;
  auto segment = std::make_unique<Segment>();
  segment->serial = next_segment_serial_++;
  segment->address = static_cast<char*>(address);
  segment->size = bytes;
  segment->small_pool = small_pool;
  Segment* raw = segment.get();
  segments_.emplace(raw->address, std::move(segment));
  account_reserve(static_cast<int64_t>(bytes));
  ++stats_.num_segment_allocs;
  emit(MemoryAction::kSegmentAlloc, bytes, address, category, tag_id);
  return raw;
}

void Allocator::unmap_segment(Segment* segment) {
  char* address = segment->address;
  uint64_t size = segment->size;
  Category category = Category::kWorkspace;
  uint32_t tag_id = 0;
  if (segment->first != nullptr) {
    category = segment->first->category;
    tag_id = segment->first->tag_id;
    // Only whole free segments are unmapped: their single block is in a pool.
    Block* block = segment->first;
    (segment->small_pool ? small_pool_ : large_pool_).erase(block);
    spare_.push_back(block);
  }
  source_->unmap(address, size);
  account_reserve(-static_cast<int64_t>(size));
  emit(MemoryAction::kSegmentFree, size, address, category, tag_id);
  segments_.erase(address);
}

Allocator::Block* Allocator::new_block() {
  Block* block;
  if (spare_.empty()) {
    block = block_storage_.emplace_back(std::make_unique<Block>()).get();
  } else {
    block = spare_.back();
    spare_.pop_back();
  }
  *block = Block{};
  return block;
}

Allocator::Block* Allocator::take_free_block(Pool& pool, uint64_t size) {
  Segment oldest;  // serial 0 and offset 0: the smallest key of this size
  Block key;
  key.size = size;
  key.segment = &oldest;
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

Allocation Allocator::hand_out(Block* block, uint64_t requested, Category category,
                               uint32_t tag_id) {
  block->id = next_id_++;
  block->allocated = true;
  block->requested = requested;
  block->tag_id = tag_id;
  block->category = category;
  block->phase = phase_;
  block->layer = layer_;
  block->step = step_;
  block->segment->live_blocks++;
  blocks_by_id_.emplace(block->id, block);
  account_alloc(block->size, category);
  emit(MemoryAction::kAlloc, block->size, block->address, category, tag_id);
  return Allocation{block->address, block->size, block->id};
}

Allocation Allocator::allocate_exact(uint64_t bytes, Category category, uint32_t tag_id,
                                     std::string_view description) {
  Segment* segment = try_map_segment(bytes, false, category, tag_id);
  if (segment == nullptr) raise_oom(bytes, bytes, bytes, category, tag_id, description);
  Block* block = new_block();
  block->address = segment->address;
  block->size = bytes;
  block->segment = segment;
  segment->first = block;
  return hand_out(block, bytes, category, tag_id);
}

Allocation Allocator::allocate_caching(uint64_t bytes, Category category, uint32_t tag_id,
                                       std::string_view description) {
  const uint64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_pool_ : large_pool_;

  Block* block = take_free_block(pool, size);
  if (block == nullptr) {
    const uint64_t segment_bytes = segment_size_for(size);
    Segment* segment = try_map_segment(segment_bytes, small, category, tag_id);
    if (segment == nullptr) {
      // PyTorch's last resort before OOM: give every cached, fully free
      // segment back and try once more.
      release_cached_segments();
      segment = try_map_segment(segment_bytes, small, category, tag_id);
    }
    if (segment == nullptr) raise_oom(bytes, size, segment_bytes, category, tag_id, description);
    block = new_block();
    block->address = segment->address;
    block->size = segment->size;
    block->small_pool = small;
    block->segment = segment;
    segment->first = block;
  }

  // Split off the tail when enough would remain to be worth a block of its
  // own: any 512 B in the small pool, more than 1 MiB in the large pool
  // (PyTorch's should_split) — smaller tails stay inside the block and count
  // as allocated, which is why allocated can exceed the bytes requested.
  const uint64_t remaining = block->size - size;
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    Block* tail = new_block();
    tail->address = block->address + size;
    tail->size = remaining;
    tail->small_pool = block->small_pool;
    tail->segment = block->segment;
    tail->prev = block;
    tail->next = block->next;
    if (block->next != nullptr) block->next->prev = tail;
    block->next = tail;
    block->size = size;
    pool.insert(tail);
  }
  return hand_out(block, bytes, category, tag_id);
}

void Allocator::free(const Allocation& allocation) {
  if (allocation.id == 0) return;  // the 0-byte allocation
  auto it = blocks_by_id_.find(allocation.id);
  HR_CHECK(it != blocks_by_id_.end(),
           "free of unknown block id " + std::to_string(allocation.id) + " (double free?)");
  Block* block = it->second;
  blocks_by_id_.erase(it);
  account_free(block->size, block->category);
  emit(MemoryAction::kFree, block->size, block->address, block->category, block->tag_id);
  block->allocated = false;
  block->id = 0;
  Segment* segment = block->segment;
  segment->live_blocks--;

  if (options_.policy == AllocatorPolicy::kExact) {
    unmap_segment(segment);  // also recycles the block
    return;
  }

  // Merge with free neighbours so the segment can become whole again.
  Pool& pool = block->small_pool ? small_pool_ : large_pool_;
  auto merge = [&](Block* dst, Block* src) {  // src is dst->next, both free
    pool.erase(src);
    dst->size += src->size;
    dst->next = src->next;
    if (src->next != nullptr) src->next->prev = dst;
    spare_.push_back(src);
  };
  if (block->next != nullptr && !block->next->allocated) merge(block, block->next);
  if (block->prev != nullptr && !block->prev->allocated) {
    Block* prev = block->prev;
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    spare_.push_back(block);
    block = prev;
  }
  pool.insert(block);
}

void Allocator::release_cached_segments() {
  // In creation order, not address order, so plan and run emit the same
  // segment_free sequence.
  std::vector<Segment*> whole_free;
  for (auto& [address, segment] : segments_)
    if (segment->live_blocks == 0) whole_free.push_back(segment.get());
  std::sort(whole_free.begin(), whole_free.end(),
            [](const Segment* a, const Segment* b) { return a->serial < b->serial; });
  for (Segment* segment : whole_free)
    unmap_segment(segment);
}

void Allocator::empty_cache() {
  release_cached_segments();
}

std::vector<LiveBlock> Allocator::largest_live_blocks(size_t limit) const {
  std::vector<const Block*> live;
  live.reserve(blocks_by_id_.size());
  for (const auto& [id, block] : blocks_by_id_)
    live.push_back(block);
  std::sort(live.begin(), live.end(), [](const Block* a, const Block* b) {
    if (a->size != b->size) return a->size > b->size;
    return a->id < b->id;
  });
  if (live.size() > limit) live.resize(limit);
  std::vector<LiveBlock> out;
  for (const Block* b : live)
    out.push_back(LiveBlock{b->size, tags_[b->tag_id], b->category, b->phase, b->layer, b->step});
  return out;
}

std::vector<LiveGroup> Allocator::live_groups(size_t limit) const {
  std::map<std::pair<std::string, Category>, LiveGroup> groups;
  for (const auto& [id, block] : blocks_by_id_) {
    const std::string pattern = tag_pattern(tags_[block->tag_id]);
    LiveGroup& g = groups[{pattern, block->category}];
    g.pattern = pattern;
    g.category = block->category;
    g.blocks += 1;
    g.bytes += block->size;
  }
  std::vector<LiveGroup> out;
  for (auto& [key, group] : groups)
    out.push_back(std::move(group));
  std::sort(out.begin(), out.end(), [](const LiveGroup& a, const LiveGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.pattern < b.pattern;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

void Allocator::raise_oom(uint64_t requested, uint64_t rounded, uint64_t segment_bytes,
                          Category category, uint32_t tag_id, std::string_view description) {
  Postmortem pm;
  pm.requested_bytes = requested;
  pm.rounded_bytes = rounded;
  pm.segment_bytes = segment_bytes;
  pm.tag = tags_[tag_id];
  pm.category = category;
  pm.phase = phase_;
  pm.layer = layer_;
  pm.step = step_;
  pm.description = std::string(description);
  pm.allocated = stats_.allocated;
  pm.reserved = stats_.reserved;
  pm.capacity = options_.capacity;
  pm.source = std::string(source_->name());
  pm.capacity_limited =
      options_.capacity != 0 && stats_.reserved + segment_bytes > options_.capacity;
  if (!source_->device_memory(&pm.device_free, &pm.device_total))
    pm.device_free = pm.device_total = 0;
  pm.live_by_category = stats_.live_by_category;
  pm.largest_live = largest_live_blocks(10);
  pm.step_start_by_category = stats_.live_by_category_at_reset;
  pm.live_groups = live_groups(kPostmortemGroups);
  emit(MemoryAction::kOom, rounded, nullptr, category, tag_id);
  throw OutOfMemory(std::move(pm));
}

}  // namespace headroom
