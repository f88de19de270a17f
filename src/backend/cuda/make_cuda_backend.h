// The cuda backend's factory, for make_backend (the one factory) only.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "backend/op.h"

namespace headroom {

// The front with the cuda table and cuBLASLt's workspace rule, on the device
// of this process's local rank. Throws UsageError (exit 2) when no device is
// visible (cuda_context.h). `allocator` must draw from make_cuda_source().
std::unique_ptr<Backend> make_cuda_backend(Allocator& allocator, uint64_t cublaslt_workspace_bytes);

// Whether the cuda table has a kernel for `op` (CudaKernels::supports, and
// require_cuda_run's list of what is missing).
bool cuda_table_supports(Op op);

}  // namespace headroom
