#include "util/local_rank.h"

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace headroom {

int local_rank_from_environment() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end != '\0' || rank < 0 || rank > 1 << 20)
      throw UsageError(std::string("environment variable ") + name + " = \"" + value +
                       "\": expected the process's local rank, a non-negative integer");
    return static_cast<int>(rank);
  }
  return 0;
}

}  // namespace headroom
