// The one switch from a floating dtype to its C++ storage type, for the cpu
// kernels written once as templates over float, bf16 and f16.
#pragma once

#include <string>

#include "tensor/dtype.h"
#include "util/error.h"

namespace headroom {

// Calls f with a null pointer of `dtype`'s storage type (float, bf16 or
// f16), so a kernel written once as a template runs on each:
//   with_floating_type(x.dtype(), [&]<typename T>(T*) { rows(x.data<T>(), ...); });
template <typename F>
decltype(auto) with_floating_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(static_cast<float*>(nullptr));
    case DType::kBF16:
      return f(static_cast<bf16*>(nullptr));
    case DType::kF16:
      return f(static_cast<f16*>(nullptr));
    default:
      break;
  }
  throw InternalError("not a floating dtype: " + std::string(name_of(dtype)));
}

}  // namespace headroom
