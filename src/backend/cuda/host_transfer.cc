// copy_from_host, copy_to_host, copy: cudaMemcpyAsync on the backend's
// stream. From the host: the source is pageable memory the caller may reuse
// on return, so the copy is waited for. To the host: the caller reads the
// bytes on return, so it is waited for too; that wait is also where an
// asynchronous kernel error of an earlier op surfaces (CudaContext::synchronize
// names it). copy: device to device, ordered on the stream, not waited for.
// Allocates: nothing.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"

namespace headroom {

void CudaKernels::copy_from_host(const void* src, Tensor& dst) {
  if (dst.nbytes() == 0) return;
  HR_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src, dst.nbytes(), cudaMemcpyHostToDevice, stream()));
  context_.synchronize("copy_from_host");
}

void CudaKernels::copy_to_host(const Tensor& src, void* dst) {
  if (src.nbytes() == 0) return;
  HR_CUDA_CHECK(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream()));
  context_.synchronize("copy_to_host");
}

void CudaKernels::copy(const Tensor& src, Tensor& dst) {
  if (src.nbytes() == 0 || src.raw() == dst.raw()) return;
  HR_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
}

}  // namespace headroom
