#include "stop_signals.h"

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "util/error.h"

namespace headroom {

namespace {

StopRequest stop_request;

extern "C" void on_stop_signal(int signal) {
  stop_request.request(signal);  // async-signal-safe: atomic stores only
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGTERM, SIGUSR2, SIGINT})
    sigaddset(&set, signal);
  return set;
}

// The one thread the stop signals are delivered to: it takes each from the
// pending set (sigwait needs them blocked, as they are in every thread made
// after install_stop_signals) and records it. Runs until the process ends.
void take_stop_signals() {
  const sigset_t set = stop_signal_set();
  for (;;) {
    int signal = 0;
    if (::sigwait(&set, &signal) == 0) stop_request.request(signal);
  }
}

}  // namespace

const StopRequest& install_stop_signals() {
  {
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    // Interrupted reads and writes (HDF5, the checkpoint files, MPI's
    // sockets) resume instead of failing with EINTR.
    action.sa_flags = SA_RESTART;
    for (int signal : {SIGTERM, SIGUSR2, SIGINT})
      if (::sigaction(signal, &action, nullptr) != 0)
        throw_system_error("sigaction(" + std::string(stop_signal_name(signal)) + ")");
  }
  // Blocked here, so in every thread started from here on (OpenMP's,
  // oneDNN's, MPI's), and taken by a thread of our own: see the header.
  const sigset_t set = stop_signal_set();
  if (const int error = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); error != 0)
    throw InternalError("pthread_sigmask(SIG_BLOCK) failed: " + std::string(std::strerror(error)));
  static const bool taker_started = [] {
    std::thread(take_stop_signals).detach();
    return true;
  }();
  (void)taker_started;
  return stop_request;
}

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGINT:
      return "SIGINT";
    default:
      break;
  }
  static thread_local char text[24];
  std::snprintf(text, sizeof text, "signal %d", signal);
  return text;
}

}  // namespace headroom
