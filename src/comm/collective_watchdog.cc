#include "comm/collective_watchdog.h"

#include <utility>

namespace headroom {

CollectiveWatchdog::CollectiveWatchdog(std::chrono::milliseconds timeout,
                                       std::function<void(const std::string&)> expire)
    : timeout_(timeout), expire_(std::move(expire)), thread_([this] { loop(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CollectiveWatchdog::arm(std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    armed_ = true;
  }
  wake_.notify_one();
}

void CollectiveWatchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
}

void CollectiveWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      wake_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    wake_.wait_until(lock, deadline);
    // Re-armed meanwhile (a later collective) moves the deadline on.
    if (!stopping_ && armed_ && deadline_ == deadline &&
        std::chrono::steady_clock::now() >= deadline)
      expire_(what_);  // holding the lock: the main thread stays in the collective
  }
}

}  // namespace headroom
