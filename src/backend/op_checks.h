// The shape and dtype rules of every op, written once.
//
// cpu, meta (and cuda) call the same check before they allocate or compute,
// so a call the real backend rejects is rejected by the plan too, with the
// same message, before any allocation: plan and run can only differ in what
// they compute, never in what they accept. Every failure throws InternalError
// naming the op, the tensors' tags and their dtypes and shapes (a wrong shape
// is a bug in the model code, not in the user's config).
#pragma once

#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace headroom {

// "'block.3.attn.q' fp32 [4, 8]"
std::string describe_operand(const Tensor& x);

void check_fill(BackendKind backend, const Tensor& x, float value);
void check_fill_uniform(BackendKind backend, const Tensor& x, float lo, float hi);
void check_copy(BackendKind backend, const Tensor& src, const Tensor& dst);
void check_cast(BackendKind backend, const Tensor& x, DType dtype);
void check_add(BackendKind backend, const Tensor& a, const Tensor& b, const Tensor& out);

// op(A) is m x k, op(B) is k x n, C is m x n.
struct GemmDims {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};
GemmDims check_gemm(BackendKind backend, const Tensor& a, bool transpose_a, const Tensor& b,
                    bool transpose_b, const Tensor& c);

// Whether cast supports from -> to: floating <-> floating, and the integer
// dtypes to fp32 (exact below 2^24, round-to-nearest above, as PyTorch does).
bool is_supported_cast(DType from, DType to);

}  // namespace headroom
