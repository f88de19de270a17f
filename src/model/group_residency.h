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
#include <vector>

#include "model/param_group.h"

namespace headroom {

class GroupResidency {
 public:
  // The order groups are used in, for fetching ahead: forward reads embed,
  // block.0 .. block.L-1, head; backward reads block.L-1 .. block.0. A use
  // outside that order (a tied table in the loss, a save) is kAlone.
  enum class Pass { kForward, kBackward, kAlone };

  virtual ~GroupResidency() = default;

  // Called once by the Transformer's constructor with its (still empty)
  // group vectors, one entry per layout: the residency allocates what it
  // keeps for the whole run and fills or empties entries on the calls below.
  // The vectors outlive the residency's use of them.
  virtual void bind(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
                    std::vector<FlatGroup>& grads) = 0;

  // params[g] must hold group g whole, with its current values, until
  // release_params(g). `pass` tells which groups come next, so they can be
  // fetched ahead.
  virtual void acquire_params(size_t g, Pass pass) = 0;
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
