// NcclComm: the Communicator over NCCL on device (cuda) tensors, one rank
// per GPU, bootstrapped over MPI_COMM_WORLD (rank 0's NCCL unique id reaches
// the others by MPI_Bcast), for jobs launched by `mpirun` or `srun`.
//
// Tensors must live on the device this communicator was made for (their
// raw() is a device pointer). Every method is synchronous in stream order:
// work queued after it on the backend's stream sees the result. While the
// backend lends its stream (use_device_stream: the CudaContext's), NCCL runs
// on a comm stream of its own between two CUDA events, one recorded on the
// lent stream before (so the collective follows the kernels that wrote its
// tensor) and one the lent stream waits for after; the host never waits for
// a collective on device tensors, and start_all_gather_in_place defers that
// second wait to wait_for (ZeRO-3's prefetch overlaps the kernels queued in
// between). Before a stream is lent, everything runs on the communicator's
// own blocking stream, ordered after the legacy default stream (the tests'
// raw launches), and each collective ends with the host waiting for it.
//
// Allocations match the other communicators (see communicator.h): fp32
// reductions, gathers and broadcasts allocate nothing; a bf16 or fp16 reduction
// widens into an fp32 comm buffer ("<tag>.comm"), reduces it and narrows it
// back through a buffer of its dtype (a reduce-scatter only this rank's piece),
// exactly as reduce_through_fp32_buffer / reduce_scatter_through_fp32_buffer
// does, so a plan on the meta backend with the simulated communicator makes
// the same allocations as a run on this one. NCCL counts are size_t: no
// piece needs splitting (unlike MPI's int counts).
//
// nccl.h and mpi.h stay out of this header: only headroom_comm_nccl sees them.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace headroom {

// Initializes MPI if it is not yet (once per process; finalized at exit),
// makes `device` current for this thread, and joins every rank of
// MPI_COMM_WORLD into one NCCL communicator on it. Collective: every rank
// must call it. Throws InternalError naming the failed MPI, CUDA or NCCL call
// and its error string.
std::unique_ptr<Communicator> make_nccl_comm(int device);
// make_nccl_comm on the device a cuda backend of this rank uses: local rank
// (util/local_rank.h) modulo the visible devices, as CudaContext picks it.
// Throws UsageError when no device is visible.
std::unique_ptr<Communicator> make_nccl_comm_for_local_rank();

}  // namespace headroom
