#include "model/param_group.h"

#include <algorithm>

#include "util/error.h"

namespace headroom {

GroupLayout GroupLayout::make(std::string name, std::vector<ParamSpec> specs) {
  GroupLayout layout;
  layout.name = std::move(name);
  layout.specs = std::move(specs);
  for (const ParamSpec& spec : layout.specs) {
    layout.offsets.push_back(spec.quantized ? -1 : layout.numel);
    if (!spec.quantized) layout.numel += numel_of(spec.shape);
  }
  return layout;
}

int GroupLayout::find(const std::string& hf_name) const {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == hf_name) return static_cast<int>(i);
  return -1;
}

FlatGroup FlatGroup::allocate(Backend& backend, const GroupLayout& layout, DType dtype,
                              Category category, const std::string& tag) {
  FlatGroup group;
  group.flat = backend.empty({layout.numel}, dtype, category, tag);
  for (size_t i = 0; i < layout.specs.size(); ++i) {
    if (layout.specs[i].quantized) {
      group.views.emplace_back();
      continue;
    }
    int64_t begin = layout.offsets[i];
    int64_t n = numel_of(layout.specs[i].shape);
    group.views.push_back(group.flat.rows(begin, begin + n).view(layout.specs[i].shape));
  }
  return group;
}

GroupShard GroupShard::of(int64_t numel, int rank, int world_size) {
  HR_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "a shard belongs to a rank");
  GroupShard shard;
  shard.size = (numel + world_size - 1) / world_size;
  shard.begin = std::min(numel, int64_t{rank} * shard.size);
  shard.end = std::min(numel, shard.begin + shard.size);
  return shard;
}

}  // namespace headroom
