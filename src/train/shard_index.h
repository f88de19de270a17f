// shard_index.json, the index of a sharded checkpoint (sharded_checkpoint.h
// describes the folder): its file names and its strict reader, apart from
// the saving and loading that need the model, so a reader of untrusted
// folders (tests/fuzz/shard_index.cc) builds without the backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/param_group.h"

namespace headroom {

inline constexpr const char* kShardIndexFile = "shard_index.json";
// "shard.rank<R>.safetensors"; under parallel.tensor = `tensor` > 1
// "shard.tp<T>.rank<R>.safetensors", R counting the data-parallel ranks.
std::string shard_file_name(int rank, int tensor_rank = 0, int tensor = 1);

// The parsed shard_index.json.
struct ShardIndex {
  struct Tensor {
    std::string name;  // Hugging Face name
    std::vector<int64_t> shape;
    int64_t offset = 0;  // elements into the flat group
    // Under tensor_parallel > 1: the dimension its parts are cut along (0
    // rows, 1 columns), -1 replicated; `shape` and `offset` are a part's.
    int split_dim = -1;
  };
  struct Group {
    std::string name;
    int64_t numel = 0;
    std::vector<GroupShard> ranges;  // per rank; only begin/end are meaningful
    std::vector<Tensor> tensors;
  };
  struct State {
    std::string name, group, dtype;
    bool elementwise = true;
  };
  std::string dir;
  int world_size = 1;  // the data-parallel ranks (rank files per part)
  // parallel.tensor of the run that wrote it: each of its parts has
  // world_size rank files, the groups describing a part.
  int tensor_parallel = 1;
  int zero_stage = 0;
  std::string dtype;  // safetensors name of the weights' dtype
  std::vector<Group> groups;
  std::vector<State> state;

  std::string file(int rank, int tensor_rank = 0) const {
    return dir + "/" + shard_file_name(rank, tensor_rank, tensor_parallel);
  }
};

// Reads and validates `dir`/shard_index.json, and that every rank file it
// implies is there and holds its "<group>.params" tensors with the sizes and
// dtype the index declares. A malformed index is a UsageError naming it (and
// the key); a missing or short rank file, one naming that file.
ShardIndex read_shard_index(const std::string& dir);

// <dir>/shard_index.json, and the format_version this build writes and reads.
std::string shard_index_path(const std::string& dir);
inline constexpr int kShardIndexVersion = 1;

}  // namespace headroom
