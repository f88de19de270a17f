// A flat parameter group: one allocation holding several named tensors.
//
// ZeRO shards, gathers and reduces groups whole (one per block, plus the
// embedding and the head), so every parameter, gradient and optimizer state
// lives in a group-shaped flat buffer and the named tensors are views into it.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"

namespace headroom {

struct ParamSpec {
  std::string name;  // Hugging Face name, e.g. "model.layers.3.self_attn.q_proj.weight"
  Shape shape;
  // Stored outside the flat buffer, in NF4 (QLoRA's frozen base): the
  // group's numel leaves it out, its offset is -1 and its view undefined.
  bool quantized = false;
};

// The layout of a group: where each named tensor sits in the flat buffer.
struct GroupLayout {
  std::string name;  // "embed", "block.3", "head"
  std::vector<ParamSpec> specs;
  std::vector<int64_t> offsets;  // element offset of specs[i]; -1 for a quantized spec
  int64_t numel = 0;
  // Whether the group gets gradients and optimizer states; a frozen base
  // under LoRA does not.
  bool trainable = true;

  static GroupLayout make(std::string name, std::vector<ParamSpec> specs);
  // Index of `hf_name` in specs, or -1.
  int find(const std::string& hf_name) const;
};

// The part of a group that rank `rank` of `world_size` owns under ZeRO: the
// group is padded to a multiple of world_size and cut into equal shards of
// `size` elements; rank r's shard starts at r * size. `begin`/`end` is the
// part of it inside the group (empty for a rank whose shard is all padding).
struct GroupShard {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size = 0;  // ceil(numel / world_size)

  int64_t numel() const { return end - begin; }
  int64_t padding() const { return size - numel(); }
  static GroupShard of(int64_t numel, int rank, int world_size);
};

// One flat buffer with the layout's views.
struct FlatGroup {
  Tensor flat;                // (numel)
  std::vector<Tensor> views;  // views[i] has specs[i].shape; undefined for a quantized spec

  // Allocates `layout.numel` elements of `dtype` under category/tag and makes
  // the views. The memory is uninitialized.
  static FlatGroup allocate(Backend& backend, const GroupLayout& layout, DType dtype,
                            Category category, const std::string& tag);
};

}  // namespace headroom
