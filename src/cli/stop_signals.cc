#include "stop_signals.h"

#include <signal.h>

#include <cstdio>

#include "util/error.h"

namespace headroom {

namespace {

StopRequest stop_request;

extern "C" void on_stop_signal(int signal) {
  stop_request.request(signal);  // async-signal-safe: atomic stores only
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
