// The rules of attention_forward / attention_backward, and the scratch
// memory they hold, written once for every backend.
//
// cpu and meta (and cuda) call the same check before they allocate or
// compute, and the same allocate_attention_backward_scratch, so a plan
// accepts, rejects and allocates exactly what a run does (DESIGN.md,
// promise 1). Every failure is an InternalError naming the op and the
// offending tensors (tag, dtype, shape) or values: a wrong shape or a bad
// cu_seqlens is a bug in the model or data layer, not the user's config.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace headroom {

// Tile buffers live on each thread's stack (no allocation, so nothing meta
// must mirror): per OpenMP thread the cpu kernels hold at most
// 4 * block_size * head_dim + 2 * block_size^2 floats (640 KiB at the limits
// below). Llama / Qwen use head_dim 64..256 and flash kernels tiles of 64 or
// 128; a config asking for more is rejected by the same check on every backend.
inline constexpr int64_t kMaxAttentionBlockSize = 128;
inline constexpr int64_t kMaxAttentionHeadDim = 256;

// The sizes one attention call works on.
struct AttentionDims {
  int64_t tokens = 0;      // T
  int64_t heads = 0;       // H
  int64_t kv_heads = 0;    // KV
  int64_t head_dim = 0;    // D
  int64_t block_size = 0;  // B
  AttentionMask mask;      // which keys each query sees

  int64_t group() const { return heads / kv_heads; }  // query heads per kv head
  int64_t tiles() const { return (tokens + block_size - 1) / block_size; }
};

// H % KV == 0, scale finite and > 0, head_dim and block_size in range, window
// and mask_block exactly for their mask kinds (what both attention backends
// demand of params). `op` prefixes the message.
void check_attention_params(std::string_view op, const AttentionParams& params);

// cu_seqlens: n_docs + 1 offsets, cu[0] = 0, cu[n_docs] = tokens, never
// decreasing (empty documents are allowed). `op` prefixes the message.
void check_cu_seqlens(std::string_view op, const std::vector<int32_t>& cu_seqlens, int64_t tokens);

// q (T, H*D), k and v (T, KV*D), all one floating dtype; out (T, H*D) in q's
// dtype; lse (H, T) fp32; params sane (H % KV == 0, scale finite and > 0,
// 1 <= block_size <= kMaxAttentionBlockSize, 1 <= head_dim <=
// kMaxAttentionHeadDim, window >= 1 exactly for sliding_window and 0 else,
// mask_block >= 1 exactly for dflash_block and 0 else); outputs disjoint from every input and
// from each other; cu_seqlens valid.
AttentionDims check_attention_forward(BackendKind backend, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                                      const AttentionParams& params, const Tensor& out,
                                      const Tensor& lse);

// The forward rules for q, k, v, out, lse (now inputs), plus d_out like out,
// dq like q, dk and dv like k; dq, dk, dv disjoint from every input and from
// each other.
AttentionDims check_attention_backward(BackendKind backend, const Tensor& d_out, const Tensor& q,
                                       const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& lse, const std::vector<int32_t>& cu_seqlens,
                                       const AttentionParams& params, const Tensor& dq,
                                       const Tensor& dk, const Tensor& dv);

// What attention_backward holds while it runs (freed when this goes out of
// scope). Forward holds nothing: its running max / sum and output tile live in
// registers and on the stack, as they do in a flash kernel's shared memory.
struct AttentionBackwardScratch {
  // (H, T) fp32, D_i = rowsum(dO_i * O_i) per head and query: every key tile
  // that query i sees needs it, so it is computed once, before the tile loops
  // (tag attention.delta, category workspace).
  Tensor delta;
};
AttentionBackwardScratch allocate_attention_backward_scratch(const Backend& backend,
                                                             const AttentionDims& dims);

}  // namespace headroom
