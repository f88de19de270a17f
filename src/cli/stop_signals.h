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
//
// Where they are delivered: to one thread of headroom's own, which waits
// for them (sigwait), never to a compute thread. install_stop_signals
// blocks them in the calling thread, hence in every thread started after
// it (OpenMP's pool, MPI's), and starts that thread. Why: oneDNN 2.6's
// gemm:jit kernels (its fp32 matmul below AVX-512, so every gemm on an
// AVX2 host) point the stack pointer into a heap buffer while they run,
// and a signal handled on such a thread pushes its frame there: "corrupted
// size vs. prev_size", SIGABRT, a few signals into a storm of them (oneDNN
// issue #4845, fixed in 3.11; Debian 12 ships 2.6.3). The handler stays
// installed for a thread that may predate the call; it is then the one
// that runs it.
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
