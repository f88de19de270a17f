#include "backend/cuda/cuda_dtype.h"

#include "util/error.h"

namespace headroom {

void refuse_cuda_dtype(const char* op, const std::string& dtypes) {
  throw UsageError(std::string("cuda ") + op + ": no cuda kernel for " + dtypes +
                   " yet (run it on run.backend = \"cpu\", or plan it with `headroom plan` "
                   "(it plans run.backend = \"cuda\" for the GPU))");
}

void refuse_cuda_dtype(const char* op, DType dtype) {
  refuse_cuda_dtype(op, std::string(name_of(dtype)));
}

}  // namespace headroom
