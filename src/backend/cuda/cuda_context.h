// What every cuda kernel call of one process shares: its device, its one
// stream and its cuBLASLt handle. Owned by the cuda backend (one per rank,
// one rank per GPU) and lent to what must run on the same stream (NcclComm),
// so compute and collectives are ordered without events.
//
// One stream, because every op of the front is issued in program order by
// one thread: the front's allocations and frees happen in that order too, so
// a block the allocator reuses is never still read by an earlier kernel on
// another stream (PyTorch needs record_stream for exactly that case).
#pragma once

#include <cstdint>
#include <string>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace headroom {

// cudaGetDeviceCount's answer: the count, or the error in words. Never throws.
struct CudaDeviceCount {
  int count = 0;
  std::string error;  // empty when the call succeeded
};
CudaDeviceCount query_cuda_device_count();

// Throws UsageError (exit 2) unless at least one device is visible, naming
// what cudaGetDeviceCount returned: `run.backend = "cuda"` on a machine
// without a GPU is a configuration the user can fix.
void require_cuda_device();

class CudaContext {
 public:
  // Selects device local_rank % device count (require_cuda_device first),
  // creates a non-blocking stream and a cuBLASLt handle.
  CudaContext();
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  // "NVIDIA H200 (device 0, sm_90, 139.8 GiB)", for traces and errors.
  const std::string& description() const { return description_; }

  // Waits for every kernel issued so far; raises the first asynchronous
  // error of any of them (with `what` naming the op that waited).
  void synchronize(const char* what) const;

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  std::string description_;
};

}  // namespace headroom
