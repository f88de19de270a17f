// A request to stop a run early and resumably (Slurm's SIGTERM or SIGUSR2
// before the time limit, a Ctrl-C). The run checks it before the first step
// and between steps: it finishes the step in flight, saves a checkpoint and
// returns RunOutcome::kStopped.
#pragma once

#include <atomic>

namespace headroom {

class StopRequest {
 public:
  // Safe to call from a signal handler: lock-free atomic stores and nothing
  // else. `signal` is the signal that asked (0: none, a caller in-process);
  // a later request does not replace the first one's signal.
  void request(int signal = 0) noexcept {
    int none = 0;
    signal_.compare_exchange_strong(none, signal, std::memory_order_relaxed);
    requested_.store(true, std::memory_order_release);
  }
  bool requested() const noexcept { return requested_.load(std::memory_order_acquire); }
  // The first request's signal number; 0 when none was given.
  int signal() const noexcept { return signal_.load(std::memory_order_relaxed); }

 private:
  static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
                "a signal handler may only touch lock-free atomics");
  std::atomic<bool> requested_{false};
  std::atomic<int> signal_{0};
};

}  // namespace headroom
