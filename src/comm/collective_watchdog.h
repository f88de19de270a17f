// CollectiveWatchdog: a deadline around each blocking collective, so a rank
// whose peer stopped (SIGSTOP, a hung kernel, a deadlock) does not wait in
// MPI forever (run.collective_timeout; PyTorch's NCCL watchdog does the same
// with its 10-minute default).
//
// One thread per watchdog sleeps until the armed deadline. The main thread
// arms it before a collective and disarms it after; both take the same
// mutex, and an expiring watchdog holds it while `expire` runs, so
//  - `expire` sees everything the main thread wrote before arm() (the step,
//    the allocator's phase, the trace's buffers), and
//  - the main thread cannot get past disarm() while `expire` runs: a
//    collective that completes at the last moment does not race it.
// `expire` is expected to end the process (MpiComm aborts the job).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace headroom {

class CollectiveWatchdog {
 public:
  // `expire(what)` runs on the watchdog's thread when a collective armed
  // with `what` has not been disarmed within `timeout`.
  CollectiveWatchdog(std::chrono::milliseconds timeout,
                     std::function<void(const std::string& what)> expire);
  ~CollectiveWatchdog();  // stops the thread (an armed deadline is dropped)
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  void arm(std::string what);
  void disarm();

 private:
  void loop();

  const std::chrono::milliseconds timeout_;
  const std::function<void(const std::string&)> expire_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool armed_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  std::thread thread_;  // last: started once the members above exist
};

// Arms `watchdog` (nullptr: none) for a scope.
class ArmedCollective {
 public:
  ArmedCollective(CollectiveWatchdog* watchdog, std::string what) : watchdog_(watchdog) {
    if (watchdog_) watchdog_->arm(std::move(what));
  }
  ~ArmedCollective() {
    if (watchdog_) watchdog_->disarm();
  }
  ArmedCollective(const ArmedCollective&) = delete;
  ArmedCollective& operator=(const ArmedCollective&) = delete;

 private:
  CollectiveWatchdog* watchdog_;
};

}  // namespace headroom
