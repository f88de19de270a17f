// One allocator event, as it is written to /memory/events in the trace.
#pragma once

#include <cstdint>

#include "memory/category.h"

namespace headroom {

enum class MemoryAction : uint8_t { kAlloc, kFree, kSegmentAlloc, kSegmentFree, kOom };

struct MemoryEvent {
  uint64_t seq;  // 0, 1, 2, ... per allocator: the order plan and run must share
  int64_t t_ns;  // steady clock, ns since the allocator was made
  int64_t step;  // the step the allocator was told about (-1 before the first)
  MemoryAction action;
  uint64_t bytes;     // block bytes (rounded by the policy) or segment bytes
  uint64_t address;   // device/host/virtual address; for comparing within one run only
  Category category;  // of the block; segments carry the category of the block that made them
  uint32_t tag_id;    // index into the allocator's tag table
  Phase phase;
  int32_t layer;  // -1 when not inside a block
};

// Receives every event, synchronously, in seq order. The trace writer is one.
class MemoryObserver {
 public:
  virtual ~MemoryObserver() = default;
  virtual void on_memory_event(const MemoryEvent& event) = 0;
};

}  // namespace headroom
