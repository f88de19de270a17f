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

cuda::FloatType float_type_of(const char* op, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return cuda::FloatType::kF32;
    case DType::kBF16:
      return cuda::FloatType::kBF16;
    case DType::kF16:
      return cuda::FloatType::kF16;
    default:
      refuse_cuda_dtype(op, dtype);
  }
}

}  // namespace headroom
