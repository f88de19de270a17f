// What the allocator knew at the moment a request could not be met.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/category.h"
#include "util/error.h"

namespace headroom {

struct LiveBlock {
  uint64_t bytes;
  std::string tag;
  Category category;
  Phase phase;    // when it was allocated
  int32_t layer;  // -1 outside a block
  int64_t step;
};

// Live blocks whose tags differ only in their numbers: "block.*.mlp.up.out"
// holds block.0.mlp.up.out ... block.35.mlp.up.out, "loss.chunk.*.logits"
// every kept chunk.
struct LiveGroup {
  std::string pattern;
  Category category = Category::kWorkspace;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
};

// `tag` with every dot-separated field that is a number replaced by "*".
std::string tag_pattern(const std::string& tag);

// Groups a postmortem keeps (Allocator::live_groups).
inline constexpr size_t kPostmortemGroups = 24;

struct Postmortem {
  // The request that failed.
  uint64_t requested_bytes = 0;  // as asked
  uint64_t rounded_bytes = 0;    // after the policy's rounding
  uint64_t segment_bytes = 0;    // the segment the policy tried to reserve (0 if none was needed)
  std::string tag;
  Category category = Category::kWorkspace;
  Phase phase = Phase::kInit;
  int32_t layer = -1;
  int64_t step = -1;
  std::string description;  // optional shape text from the caller, e.g. "fp32 [1024, 248320]"
  // The allocator at that moment.
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  uint64_t capacity = 0;          // 0 = the source's own limit (real OOM)
  std::string source;             // "host", "meta", "cuda"
  bool capacity_limited = false;  // true: memory.device_capacity said no; false: the source did
  // The driver's figures at the failure (SegmentSource::device_memory:
  // cudaMemGetInfo on cuda); both 0 where the source has none.
  uint64_t device_free = 0;
  uint64_t device_total = 0;
  std::array<uint64_t, kNumCategories> live_by_category{};
  std::vector<LiveBlock> largest_live;  // at most 10, largest first
  // live_by_category when the step began (the allocator's last
  // reset_peaks): what grew during the failing step. Not in the trace's /oom
  // attributes; advice/why.h says it.
  std::array<uint64_t, kNumCategories> step_start_by_category{};
  std::vector<LiveGroup> live_groups;  // at most kPostmortemGroups, largest first
};

// The readable table the CLI prints:
//   OutOfMemory: loss.chunk.7.logits needs 970.0 MiB (fp32 [1024, 248320]) in phase loss ...
std::string format_postmortem(const Postmortem& postmortem);

class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(Postmortem postmortem);
  const Postmortem& postmortem() const { return postmortem_; }

 private:
  Postmortem postmortem_;
};

}  // namespace headroom
