#include "train/train_state.h"

#include <vector>

#include "model/safetensors.h"
#include "train/sharded_checkpoint.h"
#include "train/trainer_state.h"

namespace headroom {

namespace {

std::string tensors_path(const std::string& dir, int rank, int64_t shards) {
  return shards == 1 ? dir + "/optimizer.safetensors"
                     : dir + "/optimizer.rank" + std::to_string(rank) + ".safetensors";
}

}  // namespace

void save_optimizer_state(AdamW& optimizer, const std::string& dir, int rank, int64_t shards) {
  try {
    SafetensorsWriter writer(tensors_path(dir, rank, shards), {{"format", "headroom-adamw"}});
    const auto tensors = optimizer.state();
    for (const auto& [name, tensor] : tensors)
      writer.declare(name, tensor->dtype(), tensor->shape());
    std::vector<char> host;
    for (const auto& [name, tensor] : tensors) {
      host.resize(tensor->nbytes());
      optimizer.state_backend().copy_to_host(*tensor, host.data());
      writer.write(name, host.data());
    }
    writer.finish();
  } catch (...) {
    discard_checkpoint(dir);
    throw;
  }
}

void save_train_state(AdamW& optimizer, const TrainState& state, const std::string& dir) {
  save_optimizer_state(optimizer, dir, 0, 1);
  save_trainer_state(state, dir);
}

TrainState load_train_state(AdamW& optimizer, const std::vector<GroupLayout>& layouts,
                            const std::string& dir, int rank, int world_size,
                            bool sharded_optimizer) {
  const TrainState state = read_train_state(dir);
  load_optimizer_resharded(optimizer, layouts, dir, state, rank, world_size, sharded_optimizer);
  return state;
}

}  // namespace headroom
