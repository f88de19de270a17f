// Error checks for CUDA runtime and cuBLASLt calls, after llm.c's cudaCheck
// and ggml's CUDA_CHECK: the failing statement, its file and line, and the
// library's own words, in an InternalError (exit 1) — a CUDA error is never
// the user's input. Out of memory is not reported here: the segment source
// turns cudaErrorMemoryAllocation into the allocator's OutOfMemory, which
// writes the postmortem (memory/cuda_source.cc).
#pragma once

#include <string>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "util/error.h"

namespace headroom {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* statement, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* statement, const char* file,
                                     int line);

}  // namespace headroom

#define HR_CUDA_CHECK(expr)                                                     \
  do {                                                                          \
    const cudaError_t hr_cuda_status_ = (expr);                                 \
    if (hr_cuda_status_ != cudaSuccess)                                         \
      ::headroom::throw_cuda_error(hr_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define HR_CUBLAS_CHECK(expr)                                                       \
  do {                                                                              \
    const cublasStatus_t hr_cublas_status_ = (expr);                                \
    if (hr_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::headroom::throw_cublas_error(hr_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)
