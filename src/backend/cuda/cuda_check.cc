#include "backend/cuda/cuda_check.h"

#include <string>

#include "backend/cuda/cublaslt_library.h"

namespace headroom {

void throw_cuda_error(cudaError_t status, const char* statement, const char* file, int line) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": " + statement + ": " +
                      cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* statement, const char* file, int line) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": " + statement + ": " +
                      cublas_status_name(status) + " (status " +
                      std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace headroom
