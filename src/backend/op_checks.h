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
#include <string_view>

#include "tensor/tensor.h"

namespace headroom {

// "'block.3.attn.q' fp32 [4, 8]"; "(undefined)" for an undefined tensor.
std::string describe_operand(const Tensor& x);

// "q 'block.3.attn.q' fp32 [4, 8]": the operand as a message names it.
std::string describe_operand(std::string_view role, const Tensor& x);

// "%.9g": a float printed so that it reads back as the same float.
std::string value_string(double value);

// ---- building blocks, shared by every family's checks (op_checks.cc,
// model_op_checks.cc, attention_checks.cc, cross_entropy_checks.cc) so that
// their messages read the same. `op` names the op ("rmsnorm_forward"),
// `role` the argument ("x", "d_out"); each throws InternalError "op: ...".

// Throws InternalError(op + ": " + message).
[[noreturn]] void fail_op(std::string_view op, const std::string& message);

// x is defined and lives on `backend` (a cpu op handed a meta tensor would
// dereference a virtual address).
void check_operand(std::string_view op, BackendKind backend, const Tensor& x,
                   std::string_view role);

// x is fp32 or bf16.
void check_floating(std::string_view op, const Tensor& x, std::string_view role);

// x has exactly `dtype`.
void check_dtype(std::string_view op, const Tensor& x, std::string_view role, DType dtype);

// x has `rank` dimensions; `layout` ("(N, V)") is what the message says they are.
void check_rank(std::string_view op, const Tensor& x, std::string_view role, int64_t rank,
                std::string_view layout);

// x and y have the same shape ("shape mismatch: ...").
void check_same_shape(std::string_view op, const Tensor& x, std::string_view x_role,
                      const Tensor& y, std::string_view y_role);

// x and y have the same dtype ("dtype mismatch: ...").
void check_same_dtype(std::string_view op, const Tensor& x, std::string_view x_role,
                      const Tensor& y, std::string_view y_role);

// x and y share no byte (empty tensors share none): for an output written
// while the input is still read. Checked on addresses, so meta agrees with
// the real backends.
void check_disjoint(std::string_view op, const Tensor& x, std::string_view x_role, const Tensor& y,
                    std::string_view y_role);

// x and y are the same elements or share none: exact aliasing is safe for a
// loop that reads element i before writing it; partial overlap would make the
// result depend on loop order and thread count.
void check_identical_or_disjoint(std::string_view op, const Tensor& x, std::string_view x_role,
                                 const Tensor& y, std::string_view y_role);

// ---- the checks of the basic ops ----

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
