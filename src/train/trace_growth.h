// The trace's size projected from its growth per step, checked at every
// flush: a run whose trace cannot fit the disk it is on stops early with the
// steps so far kept, instead of filling the disk (a plan of 10^12 steps
// would write gigabytes a minute).
#pragma once

#include <cstdint>
#include <filesystem>

namespace headroom {

class TraceGrowth {
 public:
  // After a flush of the trace at `path`, `steps_done` of this run's
  // `steps_total` steps in: throws UsageError naming the trace, its growth
  // per step and the free space once the steps left would not fit. Judges
  // only after 16 MiB of growth (HDF5 grows a file chunk by chunk).
  void check(const std::filesystem::path& path, int64_t steps_done, int64_t steps_total);

 private:
  uint64_t first_size_ = 0;
  int64_t first_steps_ = -1;
};

}  // namespace headroom
