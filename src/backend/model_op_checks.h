// The shape, dtype and aliasing rules of the model ops (host transfer, scale,
// sum_squares, dropout, embedding, rmsnorm, rope, bias, swiglu, adamw),
// written once.
//
// Same role as op_checks.h, for the ops added with the model: cpu, meta (and
// cuda) call the same check before they allocate or compute, so plan and run
// accept and reject the same calls with the same InternalError message, which
// names the op, the operands' roles, tags, dtypes and shapes.
//
// Aliasing: outputs of the row-wise and reducing ops (rmsnorm, embedding,
// sum_squares, bias_backward, adamw) must not overlap any input, because
// their loops read an input after writing part of an output. The purely
// elementwise ops (dropout, swiglu) allow an output to be exactly an input, as add
// does: element i is read before it is written, by the same iteration.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/op_checks.h"
#include "tensor/tensor.h"

namespace headroom {

// A null host pointer is accepted only for a 0-byte tensor.
void check_copy_from_host(BackendKind backend, const void* src, const Tensor& dst);
void check_copy_to_host(BackendKind backend, const Tensor& src, const void* dst);

void check_scale(BackendKind backend, const Tensor& x);
// x fp32 or bf16, any shape; out fp32 [1], disjoint from x.
void check_sum_squares(BackendKind backend, const Tensor& x, const Tensor& out);

// x, out one shape and dtype, fp32 or bf16; out is x itself or disjoint from
// it; 0 <= p < 1 (1 would scale by inf; NaN is rejected).
void check_dropout(BackendKind backend, const Tensor& x, float p, const Tensor& out);

// table (V, C) fp32/bf16; ids (T) int32; out (T, C) table's dtype.
void check_embedding_forward(BackendKind backend, const Tensor& table, const Tensor& ids,
                             const Tensor& out);
// d_out (T, C); ids (T) int32; d_table (V, C) d_out's dtype.
void check_embedding_backward(BackendKind backend, const Tensor& d_out, const Tensor& ids,
                              const Tensor& d_table);
// The one scratch tensor embedding_backward holds for the call: ids' token
// order sorted by id (int32 (T), category workspace, tag
// "embedding_backward.order"). Shared so meta allocates exactly what cpu does.
Tensor allocate_embedding_backward_order(Backend& backend, const Tensor& ids);

// x, y (N, C) one dtype; w (C) x's dtype; rstd (N) fp32; eps >= 0 and finite.
void check_rmsnorm_forward(BackendKind backend, const Tensor& x, const Tensor& w, float eps,
                           const Tensor& y, const Tensor& rstd);
// dy, x, dx (N, C) and w, dw (C) of one dtype; rstd (N) fp32. dw may be
// undefined (a frozen weight: no gradient is accumulated).
void check_rmsnorm_backward(BackendKind backend, const Tensor& dy, const Tensor& x, const Tensor& w,
                            const Tensor& rstd, const Tensor& dx, const Tensor& dw);

// op is "rope_forward" or "rope_backward". x (T, n * head_dim) fp32/bf16;
// head_dim even and > 0; positions (T) int32; theta > 0 and finite.
void check_rope(std::string_view op, BackendKind backend, const Tensor& x, const Tensor& positions,
                int64_t head_dim, float theta);

// check_gemm (op_checks.h), and bias (N) of c's dtype, disjoint from c.
GemmDims check_gemm_bias(BackendKind backend, const Tensor& a, bool transpose_a, const Tensor& b,
                         bool transpose_b, const Tensor& c, const Tensor& bias);
// x (T, N), bias (N), one dtype.
void check_bias_forward(BackendKind backend, const Tensor& x, const Tensor& bias);
// dy (T, N), d_bias (N), one dtype.
void check_bias_backward(BackendKind backend, const Tensor& dy, const Tensor& d_bias);

// gate, up, out (T, F), one dtype; out may be gate or up themselves.
void check_swiglu_forward(BackendKind backend, const Tensor& gate, const Tensor& up,
                          const Tensor& out);
// d_out, gate, up, d_gate, d_up (T, F), one dtype; d_gate and d_up are
// disjoint, and each is an input exactly or disjoint from it.
void check_swiglu_backward(BackendKind backend, const Tensor& d_out, const Tensor& gate,
                           const Tensor& up, const Tensor& d_gate, const Tensor& d_up);

// param (N) fp32 or bf16; grad (N) param's dtype; m, v (N) fp32; master
// undefined when param is fp32, and (N) fp32, (N) bf16 or undefined when
// param is bf16; all pairwise disjoint. lr, eps, weight_decay >= 0, betas
// in [0, 1), step >= 1, grad_scale finite.
void check_adamw_update(BackendKind backend, const Tensor& param, const Tensor& master,
                        const Tensor& grad, const Tensor& m, const Tensor& v,
                        const AdamWParams& params);
// As check_adamw_update, with m, v (N) uint8 and m_absmax, v_absmax
// (ceil(N / 256)) fp32, all pairwise disjoint.
void check_adamw8bit_update(BackendKind backend, const Tensor& param, const Tensor& master,
                            const Tensor& grad, const Tensor& m, const Tensor& v,
                            const Tensor& m_absmax, const Tensor& v_absmax,
                            const AdamWParams& params);

}  // namespace headroom
