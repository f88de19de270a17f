#include "backend/cuda/cuda_context.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/cublaslt_library.h"
#include "backend/cuda/cuda_check.h"
#include "util/error.h"
#include "util/local_rank.h"

namespace headroom {

CudaDeviceCount query_cuda_device_count() {
  CudaDeviceCount result;
  const cudaError_t status = cudaGetDeviceCount(&result.count);
  if (status != cudaSuccess) {
    result.count = 0;
    result.error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    (void)cudaGetLastError();  // not sticky: later calls start clean
  }
  return result;
}

void require_cuda_device() {
  const CudaDeviceCount devices = query_cuda_device_count();
  if (devices.count > 0) return;
  throw UsageError(
      "run.backend = \"cuda\": no CUDA device is visible to this process (cudaGetDeviceCount "
      "returned " +
      std::to_string(devices.count) + " devices" +
      (devices.error.empty() ? std::string() : ", " + devices.error) +
      "); run on a GPU machine, check CUDA_VISIBLE_DEVICES, or plan it with `headroom plan` "
      "(it plans run.backend = \"cuda\" for the GPU)");
}

CudaContext::CudaContext() {
  require_cuda_device();
  int count = 0;
  HR_CUDA_CHECK(cudaGetDeviceCount(&count));
  device_ = local_rank_from_environment() % count;
  HR_CUDA_CHECK(cudaSetDevice(device_));
  HR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  HR_CUBLAS_CHECK(cublaslt_library().cublasLtCreate(&cublaslt_));
  cudaDeviceProp prop{};
  HR_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  char size[32];
  std::snprintf(size, sizeof size, "%.1f GiB",
                static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  description_ = std::string(prop.name) + " (device " + std::to_string(device_) + ", sm_" +
                 std::to_string(prop.major) + std::to_string(prop.minor) + ", " + size + ")";
}

CudaContext::~CudaContext() {
  // Destructors do not throw: a failure here is after the run's results.
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  if (cublaslt_ != nullptr) (void)cublaslt_library().cublasLtDestroy(cublaslt_);
}

void CudaContext::synchronize(const char* what) const {
  const cudaError_t status = cudaStreamSynchronize(stream_);
  if (status != cudaSuccess)
    throw InternalError(std::string(what) + ": a cuda kernel issued before it failed: " +
                        cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

}  // namespace headroom
