#include "backend/cuda/cuda_check.h"

namespace headroom {

void throw_cuda_error(cudaError_t status, const char* statement, const char* file, int line) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": " + statement + ": " +
                      cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* statement, const char* file, int line) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": " + statement + ": " +
                      cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

}  // namespace headroom
