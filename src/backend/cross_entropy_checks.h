// The shape and dtype rules of the cross-entropy ops and of the fused
// linear + cross-entropy composition, written once.
//
// Kept beside op_checks.h (same conventions: InternalError naming the op, the
// tensors' tags, dtypes and shapes; cpu and meta call the same function before
// they allocate or compute, so the plan rejects exactly what the run rejects).
// Target *values* are not checked here: meta has no values, so the range check
// on targets is the real backends' (cpu/cross_entropy.cc).
#pragma once

#include <cstdint>

#include "backend/linear_cross_entropy.h"
#include "tensor/tensor.h"

namespace headroom {

// logits (N, V) fp32 or bf16; targets (N) int32; lse (N) fp32; loss_sum (1)
// fp32; the outputs are disjoint from each other and from the inputs.
void check_cross_entropy_forward(BackendKind backend, const Tensor& logits, const Tensor& targets,
                                 const Tensor& lse, const Tensor& loss_sum);
// logits (N, V) fp32 or bf16, written in place; targets (N) int32; lse (N)
// fp32; targets and lse are disjoint from logits.
void check_cross_entropy_backward(BackendKind backend, const Tensor& logits, const Tensor& targets,
                                  const Tensor& lse, float scale);

// The fused linear + cross-entropy (linear_cross_entropy.h), checked whole
// before its first allocation: hidden (T, C) and weight (V, C) share a dtype
// (fp32 or bf16); targets (T) int32; logits_dtype is fp32 or hidden's dtype
// (what gemm can write); chunk_size >= 0; loss_sum (1) fp32.
void check_linear_cross_entropy_forward(BackendKind backend, const Tensor& hidden,
                                        const Tensor& weight, const Tensor& targets,
                                        const LinearCrossEntropyOptions& options,
                                        const Tensor& loss_sum);
// Backward adds: d_hidden (T, C) and d_weight (V, C), each of its operand's
// dtype or fp32 (an fp32 main gradient), disjoint from the operands; d_weight
// may be undefined (a frozen lm_head, no weight gradient); `saved`
// as forward left it for these options (lse (T) fp32; save mode: one chunk
// per chunk of T, of logits_dtype; recompute: none); scale finite.
void check_linear_cross_entropy_backward(BackendKind backend, const Tensor& hidden,
                                         const Tensor& weight, const Tensor& targets,
                                         const LinearCrossEntropySaved& saved,
                                         const LinearCrossEntropyOptions& options, float scale,
                                         const Tensor& d_hidden, const Tensor& d_weight);

}  // namespace headroom
