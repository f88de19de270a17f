// The lm_head and cross-entropy of a tensor-parallel group with the
// vocabulary split across it (Megatron-LM's vocab-parallel cross-entropy):
// rank r holds rows [r V/N, (r+1) V/N) of the head, so it computes only its
// (T, V/N) logits, chunked as linear_cross_entropy.h chunks them (recompute
// or save), and the group combines per row what each part says:
//   lse      = log sum_r exp(lse_r), from every rank's lse_r (all-gathered);
//   the loss = sum over counted rows of lse - logit[target], where the rank
//              holding the target contributes lse_r - logit[target] through
//              the chunked op and the rest is lse - lse_owner;
//   backward = dlogits = scale (exp(logits - lse) - onehot) on the rank that
//              holds the target, scale exp(logits - lse) on the others
//              (cross_entropy_backward's target -2), so dW of each part is
//              local and d_hidden is a partial sum, which the caller sums
//              over the group (an all-reduce, or a reduce-scatter under
//              sequence parallelism).
// The per-row combination runs on the host over (N, T) floats (a cuda run
// would copy them back: the device kernel is the cuda issues' part).
//
// Allocates, beside the chunked op's own (its logits chunks are (Tc, V/N)):
// "loss.targets.part" (T) int32, category activation, until backward;
// "loss.lse.parts" (N T) fp32, category activation, and "loss.part_sum"
// (1) fp32, category workspace, inside forward.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/linear_cross_entropy.h"
#include "model/tensor_parallel.h"

namespace headroom {

struct VocabParallelSaved {
  LinearCrossEntropySaved loss;  // lse is the whole vocabulary's
  Tensor targets;                // (T) int32: this part's target, -2 elsewhere, -1 not counted
};

// hidden (T, C) (the same on every rank of the group); weight (V/N, C),
// this rank's rows of the head; targets (T) as the batch holds them (-1 not
// counted). loss_sum (1) fp32 accumulated with the whole vocabulary's summed
// loss, the same on every rank of the group.
VocabParallelSaved vocab_parallel_cross_entropy_forward(Backend& backend, const Tensor& hidden,
                                                        const Tensor& weight,
                                                        const std::vector<int32_t>& targets,
                                                        const TensorParallel& tp,
                                                        const LinearCrossEntropyOptions& options,
                                                        Tensor& loss_sum);

// d_hidden (T, C) written: this part's share, whose sum over the group is
// the whole vocabulary's; d_weight (V/N, C) accumulated (undefined:
// frozen). Consumes `saved`.
void vocab_parallel_cross_entropy_backward(Backend& backend, const Tensor& hidden,
                                           const Tensor& weight, VocabParallelSaved& saved,
                                           const LinearCrossEntropyOptions& options, float scale,
                                           Tensor& d_hidden, Tensor& d_weight);

}  // namespace headroom
