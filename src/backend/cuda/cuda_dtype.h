// What the cuda table's op files share about dtypes: the refusal of a dtype
// that has no kernel yet, and 16-bit tensors as the raw uint16 storage the
// kernels of cuda/ take (they know nothing of Tensor or DType).
#pragma once

#include <cstdint>
#include <string>

#include "float_type.h"  // cuda/: the dtypes the kernels take
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace headroom {

// Throws UsageError naming the op and the dtypes (e.g. "int32", "fp32 ->
// int8"): the cuda table's dtype coverage grows kernel by kernel, and a run
// must not get a silently wrong tensor meanwhile. Nothing has been launched.
[[noreturn]] void refuse_cuda_dtype(const char* op, const std::string& dtypes);
[[noreturn]] void refuse_cuda_dtype(const char* op, DType dtype);

// The kernels' storage type of a floating tensor of `dtype`; refused
// (refuse_cuda_dtype, naming `op`) for any other dtype.
cuda::FloatType float_type_of(const char* op, DType dtype);

// A bf16 or fp16 tensor's elements as their 16 bits.
inline uint16_t* bits16(const Tensor& x) {
  return static_cast<uint16_t*>(x.raw());
}

}  // namespace headroom
