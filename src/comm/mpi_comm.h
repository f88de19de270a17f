// MpiComm: the Communicator over MPI_COMM_WORLD on host buffers (the cpu
// backend), for jobs launched by `mpirun -np N headroom ...` or `srun`.
#pragma once

#include <memory>

#include "comm/communicator.h"

#include "util/local_rank.h"

namespace headroom {

// Whether this process was started by an MPI launcher (mpirun / mpiexec of
// Open MPI, MPICH's hydra, or srun with PMI/PMIx), judged from the
// environment, so a plain `headroom` never initializes MPI.
bool launched_by_mpi();

// The number of tasks srun started for this job step when it started them
// without an MPI plugin (SLURM_STEP_NUM_TASKS > 1 and none of the variables
// launched_by_mpi() looks for): each would train alone and overwrite the
// others' files. 0 otherwise (also inside an sbatch script, which has
// SLURM_NTASKS but no step).
int srun_tasks_without_mpi();

// The node-local rank, for choosing a device: util/local_rank.h.

// Initializes MPI (once per process; finalized at exit) and returns the
// world communicator. Throws InternalError when MPI cannot start.
std::unique_ptr<Communicator> make_mpi_comm();

}  // namespace headroom
