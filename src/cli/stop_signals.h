// The signals that stop a `train` resumably: SIGTERM (Slurm's scancel and
// time limit, Kubernetes, systemd), SIGUSR2 (the signal an sbatch script
// asks for ahead of the time limit with --signal=USR2@<seconds>; NCCL keeps
// SIGUSR1 for itself) and SIGINT (Ctrl-C). The handler only records the
// request (StopRequest::request, lock-free atomics); the run sees it before
// its first step and after every step, saves a checkpoint and `train` exits
// 5 (ExitCode::kStopped). Further signals while it does so change nothing,
// so they cannot cut the checkpoint short; SIGKILL still ends it at once
// (and leaves at most a step-N folder without trainer_state.json, which no
// resume takes).
#pragma once

#include "train/stop_request.h"

namespace headroom {

// Installs the handlers and returns the request they set (one per process:
// a later call installs them again, after a library that may have replaced
// them, MPI_Init, and returns the same request).
const StopRequest& install_stop_signals();

// "SIGTERM", "SIGUSR2", "SIGINT", or "signal <n>".
const char* stop_signal_name(int signal);

}  // namespace headroom
