// attention on meta: cpu/attention.cc's checks, then the same scratch — none
// for forward, attention.delta (H, T) fp32 workspace held for backward's
// call — from the same allocate_attention_backward_scratch. No tile plan,
// no math: the plan's cost does not grow with T^2.
#include "backend/attention_checks.h"
#include "backend/meta/meta_backend.h"

namespace headroom {

void MetaBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::vector<int32_t>& cu_seqlens,
                                    const AttentionParams& params, Tensor& out, Tensor& lse) {
  check_attention_forward(kind(), q, k, v, cu_seqlens, params, out, lse);
}

void MetaBackend::attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const std::vector<int32_t>& cu_seqlens,
                                     const AttentionParams& params, Tensor& dq, Tensor& dk,
                                     Tensor& dv) {
  const AttentionDims dims =
      check_attention_backward(kind(), d_out, q, k, v, out, lse, cu_seqlens, params, dq, dk, dv);
  AttentionBackwardScratch scratch = allocate_attention_backward_scratch(*this, dims);
}

}  // namespace headroom
