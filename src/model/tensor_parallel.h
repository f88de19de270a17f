// Tensor parallelism inside a decoder block, Megatron-LM's layout
// (Shoeybi et al. 2019): a group of N ranks holds one block between them.
//   column-parallel  q, k, v, gate, up: rank r holds rows [r out/N, (r+1)
//                    out/N) of W (out, in), so its output is its own slice
//                    of the heads (q, k, v) or of F (gate, up) and attention
//                    and swiglu run on the slice with no communication;
//   row-parallel     o, down: rank r holds the matching columns [r in/N,
//                    (r+1) in/N), so its output is a partial sum, all-reduced
//                    over the group (one all-reduce per sublayer forward);
//   backward         the input gradient of the column-parallel projections
//                    is partial and all-reduced (one per sublayer backward).
// Heads stay whole per rank: H/N query heads and KV/N kv heads, the query
// heads of one kv head on the same rank (GQA needs no exchange). The
// vocabulary is split too: rank r holds rows [r V/N, (r+1) V/N) of the
// embedding and of the head; a token another rank holds embeds as zeros and
// the embedding's output is all-reduced, and the loss is vocab-parallel
// (vocab_parallel_loss.h: each rank's logits are (T, V/N)). Norms are
// replicated: every rank of the group sees the same (all-reduced)
// activations, so their gradients agree without a collective, except
// Qwen3's q/k norm weights, which each rank applies to its own heads only:
// their gradients are partial and all-reduced too.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/lora.h"
#include "model/model_config.h"
#include "model/param_group.h"

namespace headroom {

class Communicator;

struct TensorParallel {
  int rank = 0;  // within the group
  int size = 1;  // parallel.tensor; 1: no tensor parallelism
  // The group's collectives (its world_size() is `size`); null when size 1.
  // Not owned: it outlives the model.
  Communicator* group = nullptr;
  // parallel.sequence (Megatron's sequence parallelism, Korthikanti et al.
  // 2022): the residual stream, the norms and the block inputs a
  // checkpoint keeps hold this rank's rows only, [T r/N, T (r+1)/N); each
  // sublayer all-gathers its normed input before the column-parallel
  // projections and reduce-scatters the row-parallel output instead of
  // all-reducing it (the same bytes), and backward the other way round. The
  // norm weights' gradients are then partial (this rank's rows) and summed
  // over the group.
  bool sequence = false;

  bool enabled() const { return size > 1; }
};

// Why `config` cannot be split over `size` ranks ("the model's
// num_key_value_heads = 2 is not a multiple of parallel.tensor = 4", naming
// the model's keys as config.json spells them: heads, kv heads,
// intermediate_size, vocab_size), or "" when it can.
std::string tensor_parallel_problem(const ModelConfig& config, int size);

// Whether projection t is split by its output rows (column-parallel) rather
// than by its input columns (row-parallel: o and down).
bool splits_output_rows(LoraTarget t);

// [begin, end) of rank `rank`'s part of `n` things split `size` ways
// (n % size == 0, checked by tensor_parallel_problem).
std::pair<int64_t, int64_t> tensor_parallel_part(int64_t n, int rank, int size);

// A parameter group as tensor parallelism splits it, whatever the size: the
// whole model's layout and, per spec, the dimension its parts are cut along
// (0 rows, 1 columns; -1 replicated on every rank). What a checkpoint of one
// parallel.tensor needs to be read under another.
struct SplitGroup {
  GroupLayout whole;
  std::vector<int> split_dims;  // one per spec of `whole`

  // The layout every one of `size` parts has: each split spec's dimension
  // divided by `size` (the parts are equal), offsets packed as
  // GroupLayout::make packs them.
  GroupLayout part_layout(int size) const;
};

// Elements [begin, end) of part `rank` of `size`'s flat group (in
// group.part_layout(size)) from the group's parts under `from_size`:
// from[t] is part t's whole flat group (group.part_layout(from_size)),
// `element` bytes a value; written to `out` (end - begin values). A
// replicated spec is read from part 0. Host memory only; the resharding of a
// tensor-parallel checkpoint onto another parallel.tensor.
void copy_from_parts(const SplitGroup& group, int from_size, std::span<const char* const> from,
                     int rank, int size, int64_t begin, int64_t end, size_t element, char* out);

}  // namespace headroom
