#include "train/train_state.h"

#include <vector>

#include "model/safetensors.h"
#include "train/sharded_checkpoint.h"
#include "train/trainer_state.h"

namespace headroom {

std::string optimizer_file(const std::string& dir, int rank, int64_t shards, int tensor_rank,
                           int64_t tensor) {
  std::string name = dir + "/optimizer";
  if (tensor > 1) name += ".tp" + std::to_string(tensor_rank);
  if (shards > 1) name += ".rank" + std::to_string(rank);
  return name + ".safetensors";
}

void save_optimizer_state(AdamW& optimizer, const std::string& dir, int rank, int64_t shards,
                          int tensor_rank, int64_t tensor_size) {
  try {
    SafetensorsWriter writer(optimizer_file(dir, rank, shards, tensor_rank, tensor_size),
                             {{"format", "headroom-adamw"}});
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
                            bool sharded_optimizer, const TensorParallelPart& part) {
  const TrainState state = read_train_state(dir);
  load_optimizer_resharded(optimizer, layouts, dir, state, rank, world_size, sharded_optimizer,
                           part);
  return state;
}

}  // namespace headroom
