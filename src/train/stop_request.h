// A request to stop a run early and resumably (Slurm's SIGTERM or SIGUSR2
// before the time limit). The run checks it between steps: it finishes the
// step in flight, saves a checkpoint and returns RunOutcome::kStopped.
#pragma once

#include <atomic>

namespace headroom {

class StopRequest {
 public:
  // Safe to call from a signal handler: a lock-free atomic store and
  // nothing else.
  void request() noexcept { requested_.store(true, std::memory_order_relaxed); }
  bool requested() const noexcept { return requested_.load(std::memory_order_relaxed); }

 private:
  static_assert(std::atomic<bool>::is_always_lock_free,
                "a signal handler may only touch a lock-free atomic");
  std::atomic<bool> requested_{false};
};

}  // namespace headroom
