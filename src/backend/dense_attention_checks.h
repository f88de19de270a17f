// The rules of the dense_additive attention ops (backend.h), written once for
// every backend: cpu, meta and cuda call the same check before they allocate
// anything, so a plan accepts and rejects exactly what a run does. Failures
// are InternalErrors naming the op and the offending tensors or values.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace headroom {

// The sizes one dense attention call works on: B rows of S tokens.
struct DenseAttentionDims {
  int64_t rows = 0;      // B
  int64_t seq = 0;       // S
  int64_t heads = 0;     // H
  int64_t kv_heads = 0;  // KV
  int64_t head_dim = 0;  // D

  int64_t tokens() const { return rows * seq; }                         // T
  int64_t group() const { return heads / kv_heads; }                    // query heads per kv head
  Shape per_head(int64_t n) const { return {rows, n, seq, head_dim}; }  // (B, n, S, D)
  Shape scores() const { return {rows, heads, seq, seq}; }              // (B, H, S, S)
};

// params as attention_forward takes them (block_size is not used here but
// held to the same range); rows >= 1 divides T = cu_seqlens.back(); every
// row boundary r * S is a document boundary (an offset of cu_seqlens); mask
// "causal" only with one row.
DenseAttentionDims check_dense_attention_mask(BackendKind backend,
                                              const std::vector<int32_t>& cu_seqlens, int64_t rows,
                                              const AttentionParams& params, DType dtype);

// q (T, H*D), k and v (T, KV*D) of one floating dtype, T >= 1; mask
// (B, 1, S, S) in q's dtype with B * S = T.
DenseAttentionDims check_dense_attention_forward(BackendKind backend, const Tensor& q,
                                                 const Tensor& k, const Tensor& v,
                                                 const Tensor& mask, const AttentionParams& params);

// d_out (T, H*D) floating; saved as forward left it: query and key
// (B, H, S, D) fp32, probs (B, H, S, S) fp32, value (B, H, S, D) fp32 or,
// when d_out is fp32 and KV = H, (T, KV*D) fp32.
DenseAttentionDims check_dense_attention_backward(BackendKind backend, const Tensor& d_out,
                                                  const DenseAttentionSaved& saved,
                                                  const AttentionParams& params);

}  // namespace headroom
