#include "train/trainer_state.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "train/shard_index.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_error.h"
#include "util/parse_json.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

constexpr int kFormatVersion = 1;

std::string json_path(const std::string& dir) {
  return dir + "/trainer_state.json";
}

int64_t integer_at(const nlohmann::json& j, const std::string& key, const std::string& file) {
  const nlohmann::json* value = &j;
  std::string path;
  std::stringstream keys(key);
  for (std::string part; std::getline(keys, part, '.');) {
    if (!value->is_object() || !value->contains(part))
      throw UsageError(file + ": missing key \"" + key + "\"");
    value = &(*value)[part];
  }
  if (!value->is_number_integer() || value->get<int64_t>() < 0)
    throw UsageError(file + ": \"" + key + "\" must be a non-negative integer, got " +
                     value->dump());
  return value->get<int64_t>();
}

}  // namespace

// After a failed save of the training state: the folder holds the weights
// of a checkpoint without its optimizer state or its marker. Removes what a
// checkpoint folder holds (weights.h's files and ours) and the folder itself
// once empty, so a failed save leaves no step-N/ behind, only the error.
// Best effort: that error is what the user needs; a file this cannot remove
// is in a folder without trainer_state.json, which no resume accepts.
void discard_checkpoint(const std::string& dir) {
  std::error_code ignored;
  fs::remove(json_path(dir), ignored);  // the marker first
  for (const char* name :
       {"model.safetensors", "config.json", "adapter_model.safetensors", "adapter_config.json",
        "optimizer.safetensors", "run_config.toml", kShardIndexFile})
    fs::remove(fs::path(dir) / name, ignored);
  for (fs::directory_iterator it(dir, ignored), end; !ignored && it != end; it.increment(ignored)) {
    const std::string name = it->path().filename().string();
    if ((name.starts_with("optimizer.rank") || name.starts_with("shard.rank")) &&
        name.ends_with(".safetensors"))
      fs::remove(it->path(), ignored);
  }
  fs::remove(dir, ignored);  // only if empty: nothing of the user's goes
}

void save_trainer_state(const TrainState& state, const std::string& dir) {
  nlohmann::ordered_json j;
  j["format_version"] = kFormatVersion;
  j["step"] = state.step;
  j["updates"] = state.updates;
  j["skipped"] = state.skipped;
  j["data_cursor"] = {{"epoch", state.data_epoch}, {"position", state.data_position}};
  j["optimizer_shards"] = state.optimizer_shards;
  if (state.tensor_parallel > 1) j["tensor_parallel"] = state.tensor_parallel;
  if (state.micro_batches_per_step > 0) j["micro_batches_per_step"] = state.micro_batches_per_step;
  if (state.loss_scale > 0) {
    j["loss_scale"] = state.loss_scale;
    j["loss_scale_clean_steps"] = state.scale_clean_steps;
  }
  if (state.sharded_format) j["format"] = "sharded";
  try {
    write_file_atomically(json_path(dir), j.dump(2) + "\n");
  } catch (...) {
    discard_checkpoint(dir);
    throw;
  }
}

TrainState read_train_state(const std::string& dir) {
  const std::string path = json_path(dir);
  std::ifstream in(path);
  if (!in)
    throw UsageError(path +
                     ": cannot open (a checkpoint folder written with "
                     "checkpoint.save_every holds one)");
  nlohmann::json j = parse_json_document(in, path);
  if (integer_at(j, "format_version", path) != kFormatVersion)
    throw UsageError(path + ": format_version " + j["format_version"].dump() +
                     " is not one this build reads (1)");
  TrainState state;
  state.step = integer_at(j, "step", path);
  state.updates = integer_at(j, "updates", path);
  state.skipped = integer_at(j, "skipped", path);
  state.data_epoch = integer_at(j, "data_cursor.epoch", path);
  state.data_position = integer_at(j, "data_cursor.position", path);
  state.optimizer_shards =
      j.contains("optimizer_shards") ? integer_at(j, "optimizer_shards", path) : 1;
  state.tensor_parallel =
      j.contains("tensor_parallel") ? integer_at(j, "tensor_parallel", path) : 1;
  if (state.tensor_parallel < 1)
    throw UsageError(path + ": \"tensor_parallel\" must be >= 1, got " +
                     std::to_string(state.tensor_parallel));
  if (j.contains("micro_batches_per_step")) {
    state.micro_batches_per_step = integer_at(j, "micro_batches_per_step", path);
    if (state.micro_batches_per_step < 1)
      throw UsageError(path + ": \"micro_batches_per_step\" must be >= 1, got " +
                       std::to_string(state.micro_batches_per_step));
  }
  if (j.contains("loss_scale")) {
    if (!j["loss_scale"].is_number() || !(j["loss_scale"].get<double>() > 0))
      throw UsageError(path + ": \"loss_scale\" must be a positive number, got " +
                       j["loss_scale"].dump());
    state.loss_scale = j["loss_scale"].get<double>();
    state.scale_clean_steps = integer_at(j, "loss_scale_clean_steps", path);
  }
  if (j.contains("format")) {
    if (!j["format"].is_string() || (j["format"] != "sharded" && j["format"] != "consolidated"))
      throw UsageError(path + ": \"format\" must be \"sharded\" or \"consolidated\", got " +
                       j["format"].dump());
    state.sharded_format = j["format"] == "sharded";
  }
  if (state.updates + state.skipped != state.step)
    throw UsageError(path + ": updates (" + std::to_string(state.updates) + ") + skipped (" +
                     std::to_string(state.skipped) + ") must equal step (" +
                     std::to_string(state.step) + ")");
  return state;
}

}  // namespace headroom
