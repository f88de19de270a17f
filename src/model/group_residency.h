// Where a model's parameter and gradient groups live between their uses.
//
// The Transformer announces every use of a group (reading its parameters,
// accumulating into its gradients, overwriting its parameters at init or
// load) and the end of it. Without a residency every group is allocated once,
// whole, and the announcements do nothing. ZeRO (src/parallel/zero.h)
// implements this interface to keep only a shard of each group and gather or
// reduce-scatter the rest around each use, so the model never knows how many
// ranks it runs on.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "model/param_group.h"

namespace headroom {

class GroupResidency {
 public:
  virtual ~GroupResidency() = default;

  // Called once by the Transformer's constructor with its (still empty)
  // group vectors, one entry per layout: the residency allocates what it
  // keeps for the whole run and fills or empties entries on the calls below.
  // A layout that is not trainable (a frozen base under LoRA) never gets
  // gradients. The vectors outlive the residency's use of them.
  virtual void bind(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
                    std::vector<FlatGroup>& grads) = 0;

  // params[g] must hold group g whole, with its current values, until
  // release_params(g). `ahead` lists the groups the model reads next, in
  // order (forward: the following blocks, then the head; backward: the
  // blocks below), so they can be fetched ahead; empty when g is used out of
  // that order (a tied table in the loss, a save, an adapter).
  virtual void acquire_params(size_t g, std::span<const size_t> ahead) = 0;
  virtual void release_params(size_t g) = 0;

  // params[g] must be whole but its values are about to be overwritten
  // entirely (init, load); at end_params_write(g) the new values are kept.
  // Every rank writes the same values.
  virtual void begin_params_write(size_t g) = 0;
  virtual void end_params_write(size_t g) = 0;

  // grads[g] must be whole and accumulate this micro-batch's gradients until
  // release_grads(g), after which the micro-batch adds nothing more to g.
  virtual void acquire_grads(size_t g) = 0;
  virtual void release_grads(size_t g) = 0;
};

}  // namespace headroom
