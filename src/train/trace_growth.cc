#include "train/trace_growth.h"

#include <string>
#include <system_error>

#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace headroom {

void TraceGrowth::check(const fs::path& path, int64_t steps_done, int64_t steps_total) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return;
  if (first_steps_ < 0) {
    first_size_ = size;
    first_steps_ = steps_done;
    return;
  }
  constexpr uint64_t kEnoughGrowth = uint64_t{16} << 20;
  if (steps_done <= first_steps_ || size < first_size_ + kEnoughGrowth) return;
  const double per_step =
      static_cast<double>(size - first_size_) / static_cast<double>(steps_done - first_steps_);
  const double needed = per_step * static_cast<double>(steps_total - steps_done);
  const fs::space_info space = fs::space(path.parent_path(), ec);
  if (ec || needed <= static_cast<double>(space.available)) return;
  throw UsageError(
      path.string() + ": the trace grows " + format_bytes(static_cast<uint64_t>(per_step)) +
      " per step; the " + std::to_string(steps_total - steps_done) + " steps left would need " +
      format_bytes(static_cast<uint64_t>(needed)) + " more but " + format_bytes(space.available) +
      " is free there: lower run.steps, or set trace.memory_events = false "
      "(the steps so far are kept)");
}

}  // namespace headroom
