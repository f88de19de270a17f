#include "train/shard_index.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "model/safetensors.h"
#include "util/error.h"
#include "util/json_error.h"
#include "util/parse_json.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

// --- the index, strictly -------------------------------------------------------

class JsonReader {
 public:
  explicit JsonReader(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw UsageError(path_ + ": \"" + key + "\" " + what +
                     " (a sharded checkpoint's index; rewrite it by saving again)");
  }
  const nlohmann::json& at(const nlohmann::json& j, const std::string& parent,
                           const std::string& key) const {
    if (!j.is_object() || !j.contains(key)) fail(parent + key, "is missing");
    return j[key];
  }
  int64_t integer(const nlohmann::json& j, const std::string& parent, const std::string& key,
                  int64_t min = 0) const {
    const nlohmann::json& v = at(j, parent, key);
    if (!v.is_number_integer() || v.get<int64_t>() < min)
      fail(parent + key, "must be an integer >= " + std::to_string(min) + ", got " + v.dump());
    return v.get<int64_t>();
  }
  std::string string(const nlohmann::json& j, const std::string& parent,
                     const std::string& key) const {
    const nlohmann::json& v = at(j, parent, key);
    if (!v.is_string()) fail(parent + key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  const nlohmann::json& array(const nlohmann::json& j, const std::string& parent,
                              const std::string& key) const {
    const nlohmann::json& v = at(j, parent, key);
    if (!v.is_array()) fail(parent + key, "must be an array, got " + v.dump());
    return v;
  }

 private:
  std::string path_;
};

}  // namespace

std::string shard_index_path(const std::string& dir) {
  return dir + "/" + kShardIndexFile;
}

std::string shard_file_name(int rank, int tensor_rank, int tensor) {
  const std::string part = tensor > 1 ? "tp" + std::to_string(tensor_rank) + "." : "";
  return "shard." + part + "rank" + std::to_string(rank) + ".safetensors";
}

ShardIndex read_shard_index(const std::string& dir) {
  const std::string path = shard_index_path(dir);
  std::ifstream in(path);
  if (!in)
    throw UsageError(path + ": cannot open (trainer_state.json says this is a sharded " +
                     "checkpoint, whose index this is)");
  nlohmann::json j = parse_json_document(in, path);
  const JsonReader r(path);
  ShardIndex index;
  index.dir = dir;
  if (r.string(j, "", "format") != "headroom-sharded")
    r.fail("format", "must be \"headroom-sharded\"");
  if (r.integer(j, "", "format_version") != kShardIndexVersion)
    r.fail("format_version", "is not one this build reads (1)");
  index.world_size = static_cast<int>(r.integer(j, "", "world_size", 1));
  index.zero_stage = static_cast<int>(r.integer(j, "", "zero_stage"));
  if (j.contains("tensor_parallel")) {
    const int64_t tensor = r.integer(j, "", "tensor_parallel", 1);
    if (tensor > 4096)
      r.fail("tensor_parallel", "must be at most 4096, got " + std::to_string(tensor));
    index.tensor_parallel = static_cast<int>(tensor);
  }
  index.dtype = r.string(j, "", "dtype");
  if (!parse_safetensors_dtype(index.dtype)) r.fail("dtype", "is not a safetensors dtype");
  const nlohmann::json& groups = r.array(j, "", "groups");
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string at = "groups[" + std::to_string(g) + "].";
    ShardIndex::Group group;
    group.name = r.string(groups[g], at, "name");
    group.numel = r.integer(groups[g], at, "numel");
    const nlohmann::json& ranges = r.array(groups[g], at, "ranges");
    if (ranges.size() != static_cast<size_t>(index.world_size))
      r.fail(at + "ranges", "must hold world_size (" + std::to_string(index.world_size) +
                                ") ranges, has " + std::to_string(ranges.size()));
    for (const nlohmann::json& range : ranges) {
      if (!range.is_array() || range.size() != 2 || !range[0].is_number_integer() ||
          !range[1].is_number_integer() || range[0].get<int64_t>() < 0 ||
          range[0].get<int64_t>() > range[1].get<int64_t>() ||
          range[1].get<int64_t>() > group.numel)
        r.fail(at + "ranges", "must be [begin, end] pairs inside the group, got " + range.dump());
      GroupShard shard;
      shard.begin = range[0].get<int64_t>();
      shard.end = range[1].get<int64_t>();
      shard.size = shard.numel();
      group.ranges.push_back(shard);
    }
    const nlohmann::json& tensors = r.array(groups[g], at, "tensors");
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string tat = at + "tensors[" + std::to_string(t) + "].";
      ShardIndex::Tensor tensor;
      tensor.name = r.string(tensors[t], tat, "name");
      tensor.offset = r.integer(tensors[t], tat, "offset");
      int64_t numel = 1;
      for (const nlohmann::json& d : r.array(tensors[t], tat, "shape")) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          r.fail(tat + "shape", "must hold non-negative integers");
        tensor.shape.push_back(d.get<int64_t>());
        numel *= d.get<int64_t>();
      }
      if (tensor.offset + numel > group.numel) r.fail(tat + "offset", "runs past the group");
      if (tensors[t].contains("split_dim")) {
        const int64_t dim = r.integer(tensors[t], tat, "split_dim", -1);
        if (dim > 1 || (dim >= 0 && static_cast<size_t>(dim) >= tensor.shape.size()))
          r.fail(tat + "split_dim", "must be -1 or a dimension of its shape");
        tensor.split_dim = static_cast<int>(dim);
      }
      group.tensors.push_back(std::move(tensor));
    }
    index.groups.push_back(std::move(group));
  }
  const nlohmann::json& states = r.array(j, "", "state");
  for (size_t i = 0; i < states.size(); ++i) {
    const std::string at = "state[" + std::to_string(i) + "].";
    ShardIndex::State state;
    state.name = r.string(states[i], at, "name");
    state.group = r.string(states[i], at, "group");
    state.dtype = r.string(states[i], at, "dtype");
    const nlohmann::json& e = r.at(states[i], at, "elementwise");
    if (!e.is_boolean()) r.fail(at + "elementwise", "must be true or false");
    state.elementwise = e.get<bool>();
    index.state.push_back(std::move(state));
  }
  // Every rank file the index implies, with its weights' part: a folder
  // missing one is refused here, before a resume writes anything.
  const SafetensorsDType dtype = *parse_safetensors_dtype(index.dtype);
  for (int part = 0; part < index.tensor_parallel; ++part)
    for (int rank = 0; rank < index.world_size; ++rank) {
      const std::string file = index.file(rank, part);
      if (!fs::exists(file))
        throw UsageError(file + ": missing: " + path + " says " +
                         std::to_string(index.world_size * index.tensor_parallel) +
                         " ranks wrote this checkpoint, each its own " +
                         shard_file_name(rank, part, index.tensor_parallel));
      const SafetensorsIndex tensors = SafetensorsIndex::open(file);
      for (const ShardIndex::Group& group : index.groups) {
        const GroupShard& range = group.ranges[static_cast<size_t>(rank)];
        if (range.numel() == 0) continue;
        const SafetensorsEntry& entry = tensors.at(group.name + ".params");
        if (entry.dtype != dtype || entry.numel() != range.numel())
          throw UsageError(file + ": " + entry.name + ": " +
                           std::string(safetensors_name(entry.dtype)) + " x " +
                           std::to_string(entry.numel()) + ", but " + path + " says " +
                           index.dtype + " x " + std::to_string(range.numel()));
      }
    }
  return index;
}

}  // namespace headroom
