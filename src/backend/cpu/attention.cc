// STUB: replaced by the op's implementation.
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"

namespace headroom {

void CpuBackend::attention_forward(const Tensor& /*q*/, const Tensor& /*k*/, const Tensor& /*v*/,
                                   const std::vector<int32_t>& /*cu_seqlens*/,
                                   const AttentionParams& /*params*/, Tensor& /*out*/,
                                   Tensor& /*lse*/) {
  throw InternalError("attention_forward: not implemented on cpu yet");
}

void CpuBackend::attention_backward(const Tensor& /*d_out*/, const Tensor& /*q*/,
                                    const Tensor& /*k*/, const Tensor& /*v*/, const Tensor& /*out*/,
                                    const Tensor& /*lse*/,
                                    const std::vector<int32_t>& /*cu_seqlens*/,
                                    const AttentionParams& /*params*/, Tensor& /*dq*/,
                                    Tensor& /*dk*/, Tensor& /*dv*/) {
  throw InternalError("attention_backward: not implemented on cpu yet");
}

}  // namespace headroom
