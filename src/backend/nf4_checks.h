// The rules of the NF4 ops (backend.h, nf4_quantize / nf4_dequantize): the
// storage of a weight is consistent with its shape (backend/common/nf4.h's
// sizes and dtypes), and the dense side matches it.
#pragma once

#include "backend/nf4_weight.h"

namespace headroom {

// q.shape 2-D; q.codes (ceil(n/2)) uint8; q.absmax (ceil(n/64)) fp32, or
// uint8 with q.absmax2 (ceil(ceil(n/64)/256)) fp32 and q.offset (1) fp32;
// all on `backend` and pairwise disjoint. `op` names the op in the message.
void check_nf4_weight(std::string_view op, BackendKind backend, const Nf4Weight& q);
// w fp32 or bf16 of q.shape, disjoint from q.
void check_nf4_quantize(BackendKind backend, const Tensor& w, const Nf4Weight& q);
// q as above; dtype fp32 or bf16.
void check_nf4_dequantize(BackendKind backend, const Nf4Weight& q, DType dtype);

}  // namespace headroom
