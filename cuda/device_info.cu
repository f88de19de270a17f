#include "kernels.h"

namespace headroom::cuda {

cudaError_t device_memory(uint64_t* free_bytes, uint64_t* total_bytes) {
  size_t free_b = 0, total_b = 0;
  cudaError_t status = cudaMemGetInfo(&free_b, &total_b);
  *free_bytes = free_b;
  *total_bytes = total_b;
  return status;
}

}  // namespace headroom::cuda
