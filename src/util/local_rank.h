// The process's rank among the ranks of its node, as its launcher says it:
// for choosing a GPU (device = local rank % devices), in one place for the
// cuda backend and the MPI/NCCL communicators.
#pragma once

namespace headroom {

// OMPI_COMM_WORLD_LOCAL_RANK (mpirun), else SLURM_LOCALID (srun), else
// MPI_LOCALRANKID (MPICH), else LOCAL_RANK (torchrun-style launchers), else
// 0 (a single process). Throws UsageError naming the variable when its value
// is not a non-negative integer.
int local_rank_from_environment();

}  // namespace headroom
