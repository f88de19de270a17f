// Fused linear + cross-entropy over token chunks: the lm_head and the loss.
//
//   logits = hidden @ weight^T            (T, V), one chunk of Tc rows at a time
//   loss_sum += sum over counted tokens of lse - logits[target]
//
// A composition of Backend ops (gemm, cross_entropy_forward/backward, cast),
// not an op: it is written once over Backend&, so the plan (meta) makes the
// run's allocations by construction. The caller sets the phase; this only tags.
//
// Memory, per mode (DESIGN.md's knobs; seed 001 is the reason both exist):
//  - recompute (save_softmax = false), Megatron's --recompute-loss-function:
//    forward holds one (Tc, V) logits chunk at a time and keeps only lse (T
//    fp32). Backward recomputes each chunk's logits with the same gemm, turns
//    them into dlogits in place, multiplies, and frees the chunk before the
//    next. Peak of category `logits`: one chunk.
//  - save (save_softmax = true), plain chunking: forward keeps every chunk's
//    buffer for backward, so the `logits` category peaks at T x V x
//    sizeof(logits_dtype) whatever the chunk size — chunking lowers the size
//    of one allocation, not what is retained. Backward only converts each
//    kept chunk to dlogits (no gemm), frees it, and goes on.
//    A kept chunk holds the raw logits; with lse they determine the softmax
//    (p = exp(logits - lse)), which backward forms in place. PyTorch keeps the
//    softmax itself; the bytes kept are the same.
//
// logits_dtype fp32 with bf16 hidden/weight is the fp32 upcast: gemm writes
// fp32 logits from bf16 operands. In backward the dlogits are then cast to
// bf16 (one more (Tc, V) buffer, tag loss.chunk.<i>.dlogits, category logits,
// alive with the fp32 chunk during the cast) because gemm multiplies
// operands of one dtype — which is also what PyTorch does: the gradient of
// .float() is a bf16 tensor.
//
// Tags (category): loss.lse (activation), loss.chunk.<i>.logits (logits) in
// forward and again in recompute backward, loss.chunk.<i>.dlogits (logits,
// upcast only). Everything else is gemm's own workspace.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace headroom {

struct LinearCrossEntropyOptions {
  int64_t chunk_size = 0;            // tokens per chunk; 0 = all T in one chunk
  bool save_softmax = false;         // mode "save"; false = mode "recompute"
  DType logits_dtype = DType::kF32;  // fp32 (upcast) or the dtype of hidden
};

// What forward keeps for backward; backward consumes it.
struct LinearCrossEntropySaved {
  Tensor lse;                  // (T) fp32, category activation, tag loss.lse
  std::vector<Tensor> chunks;  // save mode only: chunk i's (Tc, V) logits, category
                               // logits, tag loss.chunk.<i>.logits; dlogits in backward
};

// Rows in every chunk but possibly the last (which holds the rest).
int64_t linear_cross_entropy_chunk_rows(int64_t tokens, int64_t chunk_size);
// How many chunks T tokens make (0 when T is 0).
int64_t linear_cross_entropy_num_chunks(int64_t tokens, int64_t chunk_size);

// hidden (T, C) and weight (V, C) (the lm_head), one dtype; targets (T)
// int32, -1 = not counted. loss_sum (1) fp32 accumulated with the summed loss
// of the counted tokens (divide by their count for the mean).
LinearCrossEntropySaved linear_cross_entropy_forward(Backend& backend, const Tensor& hidden,
                                                     const Tensor& weight, const Tensor& targets,
                                                     const LinearCrossEntropyOptions& options,
                                                     Tensor& loss_sum);

// d_hidden (T, C) written; d_weight (V, C) accumulated (both of their
// operand's dtype, or fp32). scale = dLoss / dloss_sum (1 / counted tokens for
// the mean), finite. Same hidden, weight, targets and options as forward.
// Consumes `saved`: each kept chunk is freed once used, and lse at the end.
// d_weight may be undefined (a frozen lm_head, as in LoRA): the weight
// gradient gemm (and its workspace) is skipped in every mode; everything else,
// the upcast's dlogits chunk included (d_hidden's gemm needs it too), is
// allocated as before, and d_hidden has the same bits.
void linear_cross_entropy_backward(Backend& backend, const Tensor& hidden, const Tensor& weight,
                                   const Tensor& targets, LinearCrossEntropySaved& saved,
                                   const LinearCrossEntropyOptions& options, float scale,
                                   Tensor& d_hidden, Tensor& d_weight);

}  // namespace headroom
