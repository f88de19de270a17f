#include "train/sharded_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/safetensors.h"
#include "model/weights.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_error.h"

namespace fs = std::filesystem;

namespace headroom {

namespace {

// The group a state tensor "<group>.<what>" belongs to: the longest group
// name followed by a dot ("block.1" is not a prefix of "block.10.adam_m").
size_t group_of(const std::vector<GroupLayout>& layouts, const std::string& name) {
  size_t best = layouts.size();
  for (size_t g = 0; g < layouts.size(); ++g) {
    const std::string prefix = layouts[g].name + ".";
    if (name.starts_with(prefix) &&
        (best == layouts.size() || prefix.size() > layouts[best].name.size() + 1))
      best = g;
  }
  HR_CHECK(best < layouts.size(), "optimizer state " + name + " names no parameter group");
  return best;
}

// One value per parameter of the rank's optimizer shard (moments, master),
// so it can be cut at any element; anything else (a per-block scale) is
// kept whole, as the rank holds it.
bool elementwise(const Tensor& tensor, const GroupShard& shard) {
  return tensor.numel() == shard.numel();
}

// Overlap of [a.begin, a.end) and [b.begin, b.end); empty when none.
std::pair<int64_t, int64_t> overlap(const GroupShard& a, const GroupShard& b) {
  const int64_t begin = std::max(a.begin, b.begin), end = std::min(a.end, b.end);
  return {begin, std::max(begin, end)};
}

}  // namespace

void check_sharded_checkpoint(const ShardIndex& index, const std::vector<GroupLayout>& layouts,
                              DType dtype) {
  const std::string path = shard_index_path(index.dir);
  const std::string want(safetensors_name(to_safetensors(dtype)));
  if (index.dtype != want)
    throw UsageError(path + ": the checkpoint's weights are " + index.dtype +
                     " but model.dtype is " + want +
                     ": resume with the model.dtype the checkpoint was trained with");
  // The base groups (adapters are not saved sharded).
  size_t base = 0;
  while (base < layouts.size() && !layouts[base].name.starts_with("lora."))
    ++base;
  if (index.groups.size() != base)
    throw UsageError(path + ": " + std::to_string(index.groups.size()) +
                     " parameter groups, this model has " + std::to_string(base) +
                     " (another model.preset or num_layers?)");
  for (size_t g = 0; g < base; ++g) {
    const ShardIndex::Group& group = index.groups[g];
    const GroupLayout& layout = layouts[g];
    bool same = group.name == layout.name && group.numel == layout.numel &&
                group.tensors.size() == layout.specs.size();
    for (size_t i = 0; same && i < layout.specs.size(); ++i)
      same = group.tensors[i].name == layout.specs[i].name &&
             group.tensors[i].shape == layout.specs[i].shape &&
             group.tensors[i].offset == layout.offsets[i];
    if (!same)
      throw UsageError(path + ": group " + group.name + " (" + std::to_string(group.numel) +
                       " elements) is not this model's group " + layout.name + " (" +
                       std::to_string(layout.numel) +
                       " elements): is it a checkpoint of this model?");
  }
}

void prepare_sharded_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(dir + ": cannot create checkpoint folder: " + ec.message());
  const std::string marker = dir + "/trainer_state.json";
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT)
    throw_file_error(marker, "cannot remove the previous checkpoint's marker", errno);
}

void save_shard(Backend& backend, Transformer& model, Zero& zero, AdamW& optimizer,
                const std::string& dir, int rank, int world_size) {
  HR_CHECK(backend.kind() != BackendKind::kMeta, "saving a meta model: " + dir);
  const auto& layouts = model.layouts();
  const size_t base = model.num_base_groups();
  // What goes in, in declaration order: (name, source tensor rows).
  struct Item {
    std::string name;
    Tensor rows;
    Backend* from;
  };
  std::vector<Item> items;
  const auto state = optimizer.state();
  for (size_t g = 0; g < base; ++g) {
    const GroupShard range = GroupShard::of(layouts[g].numel, rank, world_size);
    if (range.numel() == 0) continue;
    // Stage 3 holds this rank's shard (zero.shard(g) == range); stages 0-2
    // hold the whole group.
    const bool own = zero.stage() == 3;
    const Tensor source = own ? zero.param_shard(g) : model.params()[g].flat;
    const int64_t at = own ? zero.shard(g).begin : 0;
    HR_CHECK(source.defined() && range.begin >= at && range.end - at <= source.numel(),
             layouts[g].name + ": this rank holds its range of the parameters");
    items.push_back(
        {layouts[g].name + ".params", source.rows(range.begin - at, range.end - at), &backend});
    for (const auto& [name, tensor] : state) {
      if (group_of(layouts, name) != g) continue;
      const GroupShard& held = optimizer.shard(g);
      if (elementwise(*tensor, held)) {
        HR_CHECK(range.begin >= held.begin && range.end <= held.end,
                 name + ": this rank holds its range of the optimizer state");
        items.push_back({name, tensor->rows(range.begin - held.begin, range.end - held.begin),
                         &optimizer.state_backend()});
      } else {
        items.push_back({name, *tensor, &optimizer.state_backend()});
      }
    }
  }
  const TensorParallel& tp = model.options().tensor_parallel;
  SafetensorsWriter writer(dir + "/" + shard_file_name(rank, tp.rank, tp.size),
                           {{"format", "headroom-sharded"}});
  for (const Item& item : items)
    writer.declare(item.name, item.rows.dtype(), item.rows.shape());
  std::vector<char> host;
  for (const Item& item : items) {
    host.resize(item.rows.nbytes());
    item.from->copy_to_host(item.rows, host.data());
    writer.write(item.name, host.data());
  }
  writer.finish();
}

void save_shard_index(Transformer& model, Zero& zero, AdamW& optimizer, const std::string& dir,
                      int world_size) {
  const auto& layouts = model.layouts();
  nlohmann::ordered_json j;
  j["format"] = "headroom-sharded";
  j["format_version"] = kShardIndexVersion;
  j["world_size"] = world_size;
  j["zero_stage"] = zero.stage();
  const int parts = model.options().tensor_parallel.size;
  if (parts > 1) j["tensor_parallel"] = parts;
  j["dtype"] = std::string(safetensors_name(to_safetensors(model.options().dtype)));
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (size_t g = 0; g < model.num_base_groups(); ++g) {
    nlohmann::ordered_json group;
    group["name"] = layouts[g].name;
    group["numel"] = layouts[g].numel;
    nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
    for (int r = 0; r < world_size; ++r) {
      const GroupShard range = GroupShard::of(layouts[g].numel, r, world_size);
      ranges.push_back({range.begin, range.end});
    }
    group["ranges"] = ranges;
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
    for (size_t i = 0; i < layouts[g].specs.size(); ++i) {
      tensors.push_back({{"name", layouts[g].specs[i].name},
                         {"shape", layouts[g].specs[i].shape},
                         {"offset", layouts[g].offsets[i]}});
      if (parts > 1) tensors.back()["split_dim"] = model.split_dim(g, i);
    }
    group["tensors"] = tensors;
    groups.push_back(group);
  }
  j["groups"] = groups;
  // The lead's shards are never all padding, so its list names every state.
  nlohmann::ordered_json states = nlohmann::ordered_json::array();
  for (const auto& [name, tensor] : optimizer.state()) {
    const size_t g = group_of(layouts, name);
    states.push_back({{"name", name},
                      {"group", layouts[g].name},
                      {"dtype", std::string(safetensors_name(to_safetensors(tensor->dtype())))},
                      {"elementwise", elementwise(*tensor, optimizer.shard(g))}});
  }
  j["state"] = states;
  write_file_atomically(shard_index_path(dir), j.dump(1) + "\n");
  write_file_atomically(dir + "/config.json",
                        hf_config_json(model.config(), model.options().dtype));
}

namespace {

// A checkpoint's rank files, as a loader of any layout reads them: per
// tensor-parallel part of the writer, its data-parallel rank files, each
// holding ranges[r][g] of the part's flat group g (the parts' layouts are
// equal, so the ranges are too).
struct RankFiles {
  int parts = 1;                                // parallel.tensor of the run that wrote it
  int world = 1;                                // data-parallel rank files per part
  bool sharded_optimizer = false;               // each old rank held its own optimizer shard
  std::vector<std::vector<std::string>> files;  // [part][r]
  std::vector<std::vector<GroupShard>> ranges;  // [r][g]
  std::vector<std::vector<std::unique_ptr<SafetensorsIndex>>> opened;

  const SafetensorsIndex& at(int part, int r) {
    auto& file = opened[static_cast<size_t>(part)][static_cast<size_t>(r)];
    if (!file)
      file = std::make_unique<SafetensorsIndex>(
          SafetensorsIndex::open(files[static_cast<size_t>(part)][static_cast<size_t>(r)]));
    return *file;
  }

  // Values [begin, end) of tensor `name` (one per element of part `part`'s
  // flat group g, `element` bytes each) from the files holding them, into
  // `out`; `check` sees each entry before it is read.
  template <typename Check>
  void read(int part, size_t g, const std::string& name, int64_t begin, int64_t end, size_t element,
            char* out, const Check& check) {
    GroupShard want;
    want.begin = begin;
    want.end = end;
    for (int r = 0; r < world; ++r) {
      const GroupShard& held = ranges[static_cast<size_t>(r)][g];
      const auto [from, to] = overlap(held, want);
      if (from >= to) continue;
      const SafetensorsEntry& entry = at(part, r).at(name);
      check(entry, held);
      at(part, r).read_range(entry, static_cast<uint64_t>(from - held.begin) * element,
                             static_cast<uint64_t>(to - from) * element,
                             out + static_cast<size_t>(from - begin) * element);
    }
  }
};

RankFiles sharded_rank_files(const ShardIndex& index) {
  RankFiles files;
  files.parts = index.tensor_parallel;
  files.world = index.world_size;
  files.sharded_optimizer = index.zero_stage >= 1 && index.world_size > 1;
  for (int t = 0; t < index.tensor_parallel; ++t) {
    files.files.emplace_back();
    for (int r = 0; r < index.world_size; ++r)
      files.files.back().push_back(index.file(r, t));
  }
  for (int r = 0; r < index.world_size; ++r) {
    std::vector<GroupShard> of_file;
    for (const ShardIndex::Group& group : index.groups)
      of_file.push_back(group.ranges[static_cast<size_t>(r)]);
    files.ranges.push_back(std::move(of_file));
  }
  return files;
}

// The old parts' layouts: this run's when the size is the same, else each
// group's split into the writer's parts.
std::vector<GroupLayout> layouts_of_parts(const std::vector<GroupLayout>& layouts,
                                          const TensorParallelPart& mine, int parts) {
  if (parts == mine.size) return layouts;
  HR_CHECK(mine.groups.size() == layouts.size(),
           "reading another parallel.tensor's checkpoint needs every group's split");
  std::vector<GroupLayout> old;
  for (const SplitGroup& group : mine.groups)
    old.push_back(group.part_layout(parts));
  return old;
}

void open_all(RankFiles& files) {
  for (const auto& part : files.files) {
    for (const std::string& file : part)
      if (!fs::exists(file))
        throw UsageError(file + ": missing: the checkpoint was written by " +
                         std::to_string(files.parts * files.world) + " rank file(s)");
    files.opened.emplace_back(part.size());
  }
}

}  // namespace

void load_sharded_weights(Backend& backend, Transformer& model, const ShardIndex& index) {
  const bool meta = backend.kind() == BackendKind::kMeta;
  RankFiles files = sharded_rank_files(index);
  open_all(files);
  const TensorParallel& tp = model.options().tensor_parallel;
  auto check = [](const SafetensorsEntry&, const GroupShard&) {};
  std::vector<char> host;
  std::vector<std::vector<char>> parts;
  for (size_t g = 0; g < model.num_base_groups(); ++g) {
    model.begin_params_write(g);
    if (!meta) {
      Tensor& flat = model.params()[g].flat;
      const size_t element = size_of(flat.dtype());
      const std::string name = index.groups[g].name + ".params";
      host.assign(flat.nbytes(), 0);
      if (index.tensor_parallel == tp.size) {
        files.read(tp.rank, g, name, 0, flat.numel(), element, host.data(), check);
      } else {
        // Each old part whole, then this rank's part cut from them.
        const SplitGroup split = model.split_group(g);
        parts.assign(static_cast<size_t>(index.tensor_parallel), {});
        std::vector<const char*> from;
        for (int t = 0; t < index.tensor_parallel; ++t) {
          auto& part = parts[static_cast<size_t>(t)];
          part.assign(static_cast<size_t>(index.groups[g].numel) * element, 0);
          files.read(t, g, name, 0, index.groups[g].numel, element, part.data(), check);
          from.push_back(part.data());
        }
        copy_from_parts(split, index.tensor_parallel, from, tp.rank, tp.size, 0, flat.numel(),
                        element, host.data());
      }
      backend.copy_from_host(host.data(), flat);
    }
    model.end_params_write(g);
  }
}

void load_optimizer_resharded(AdamW& optimizer, const std::vector<GroupLayout>& layouts,
                              const std::string& dir, const TrainState& state, int rank,
                              int world_size, bool sharded_optimizer,
                              const TensorParallelPart& mine_tp) {
  RankFiles files;
  // Each old part's layout (the same for every part): its elements are
  // what the old files hold and, under another parallel.tensor, what is
  // read whole before this rank's part is cut from them.
  std::vector<GroupLayout> old_layouts;
  if (state.sharded_format) {
    files = sharded_rank_files(read_shard_index(dir));
    old_layouts = layouts_of_parts(layouts, mine_tp, files.parts);
  } else {
    files.parts = static_cast<int>(state.tensor_parallel);
    files.world = static_cast<int>(state.optimizer_shards);
    files.sharded_optimizer = files.world > 1;
    for (int t = 0; t < files.parts; ++t) {
      files.files.emplace_back();
      for (int r = 0; r < files.world; ++r)
        files.files.back().push_back(optimizer_file(dir, r, files.world, t, files.parts));
    }
    old_layouts = layouts_of_parts(layouts, mine_tp, files.parts);
    for (int r = 0; r < files.world; ++r) {
      std::vector<GroupShard> of_file;
      for (const GroupLayout& layout : old_layouts)
        of_file.push_back(GroupShard::of(layout.numel, r, files.world));
      files.ranges.push_back(std::move(of_file));
    }
  }
  open_all(files);
  const bool same_parts = files.parts == mine_tp.size;
  Backend& states = optimizer.state_backend();
  std::vector<char> host;
  std::vector<std::vector<char>> parts;
  for (const auto& [name, tensor] : optimizer.state()) {
    const size_t g = group_of(layouts, name);
    const GroupShard& mine = optimizer.shard(g);
    const size_t element = size_of(tensor->dtype());
    const SafetensorsDType want = to_safetensors(tensor->dtype());
    host.assign(tensor->nbytes(), 0);
    auto check_dtype = [&](const SafetensorsEntry& entry) {
      if (entry.dtype != want)
        throw UsageError(
            entry.file + ": " + name + ": " + std::string(safetensors_name(entry.dtype)) +
            ", this run's optimizer keeps it in " + std::string(safetensors_name(want)) +
            " (another model.dtype or optimizer setting?)");
    };
    auto check = [&](const SafetensorsEntry& entry, const GroupShard& held) {
      check_dtype(entry);
      if (entry.numel() != held.numel())
        throw UsageError(
            entry.file + ": " + name + ": " + std::to_string(entry.numel()) +
            " values, not one per parameter of its shard (" + std::to_string(held.numel()) +
            "): it cannot be resharded; resume with the world size (" +
            std::to_string(files.parts * files.world) + ") and zero.stage that wrote it");
    };
    if (elementwise(*tensor, mine) && same_parts) {
      files.read(mine_tp.rank, g, name, mine.begin, mine.end, element, host.data(), check);
    } else if (elementwise(*tensor, mine)) {
      // Every old part's values whole (one state of one group in host
      // memory), then this rank's shard of its part cut from them.
      const int64_t old_numel = old_layouts[g].numel;
      parts.assign(static_cast<size_t>(files.parts), {});
      std::vector<const char*> from;
      for (int t = 0; t < files.parts; ++t) {
        auto& part = parts[static_cast<size_t>(t)];
        part.assign(static_cast<size_t>(old_numel) * element, 0);
        files.read(t, g, name, 0, old_numel, element, part.data(), check);
        from.push_back(part.data());
      }
      copy_from_parts(mine_tp.groups[g], files.parts, from, mine_tp.rank, mine_tp.size, mine.begin,
                      mine.end, element, host.data());
    } else {
      // Kept as the rank held it: only the same sharding has it (or, with
      // replicated states on both sides, any rank's copy).
      const bool same = same_parts && files.sharded_optimizer == sharded_optimizer &&
                        (!sharded_optimizer || files.world == world_size);
      const std::string& first = files.files.front().front();
      if (!same)
        throw UsageError(first + ": " + name +
                         " is not one value per parameter, so it cannot be resharded: resume "
                         "with the world size (" +
                         std::to_string(files.parts * files.world) +
                         "), parallel.tensor and zero.stage that wrote it");
      const int r = sharded_optimizer ? rank : 0;
      const SafetensorsEntry& entry = files.at(mine_tp.rank, r).at(name);
      check_dtype(entry);
      if (entry.shape != tensor->shape())
        throw UsageError(entry.file + ": " + name + ": shape " + shape_to_string(entry.shape) +
                         ", expected " + shape_to_string(tensor->shape()));
      files.at(mine_tp.rank, r).read_raw(entry, host.data());
    }
    if (states.kind() != BackendKind::kMeta) states.copy_from_host(host.data(), *tensor);
  }
}

uint64_t export_sharded(const std::string& dir, const std::string& out, bool overwrite) {
  if (!fs::exists(dir + "/trainer_state.json"))
    throw UsageError(dir +
                     "/trainer_state.json: missing: not a complete checkpoint (a save that "
                     "did not finish leaves none)");
  if (!fs::exists(shard_index_path(dir))) {
    if (fs::exists(dir + "/model.safetensors"))
      throw UsageError(dir +
                       ": a consolidated checkpoint: its model.safetensors and config.json "
                       "already are a Hugging Face folder");
    throw UsageError(shard_index_path(dir) + ": missing: not a sharded checkpoint");
  }
  const ShardIndex index = read_shard_index(dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw UsageError(out + ": cannot create the export folder: " + ec.message());
  const std::string target = out + "/model.safetensors";
  if (fs::exists(target) && !overwrite)
    throw UsageError(target + ": exists; pass --overwrite to replace it");
  RankFiles files = sharded_rank_files(index);
  open_all(files);
  const int parts = index.tensor_parallel;
  const SafetensorsDType dtype = *parse_safetensors_dtype(index.dtype);
  const uint64_t element = safetensors_size(dtype);
  auto whole_shape = [&](const ShardIndex::Tensor& tensor) {
    std::vector<int64_t> shape = tensor.shape;
    if (parts > 1 && tensor.split_dim >= 0) shape[static_cast<size_t>(tensor.split_dim)] *= parts;
    return shape;
  };
  // What save_weights writes for a consolidated checkpoint: the same
  // metadata, the same tensors in the same order, so the same bytes.
  SafetensorsWriter writer(target, {{"format", "pt"}, {"created_by", "headroom"}});
  for (const ShardIndex::Group& group : index.groups)
    for (const ShardIndex::Tensor& tensor : group.tensors)
      writer.declare(tensor.name, dtype, whole_shape(tensor));
  auto no_check = [](const SafetensorsEntry&, const GroupShard&) {};
  std::vector<char> buffer;
  uint64_t bytes = 0;
  auto write = [&](const std::string& name, const char* data, size_t size) {
    writer.write_part(name, data, size);
    bytes += size;
  };
  for (size_t g = 0; g < index.groups.size(); ++g) {
    const ShardIndex::Group& group = index.groups[g];
    const std::string params = group.name + ".params";
    for (const ShardIndex::Tensor& tensor : group.tensors) {
      const int64_t numel = numel_of(tensor.shape);  // a part's
      if (parts > 1 && tensor.split_dim == 1) {
        // A column split: each whole row is every part's row in turn.
        std::vector<std::vector<char>> held(static_cast<size_t>(parts));
        for (int t = 0; t < parts; ++t) {
          held[static_cast<size_t>(t)].resize(static_cast<size_t>(numel) * element);
          files.read(t, g, params, tensor.offset, tensor.offset + numel, element,
                     held[static_cast<size_t>(t)].data(), no_check);
        }
        const int64_t cols = numel / tensor.shape[0];
        const size_t row = static_cast<size_t>(cols) * element;
        for (int64_t r = 0; r < tensor.shape[0]; ++r)
          for (int t = 0; t < parts; ++t)
            write(tensor.name, held[static_cast<size_t>(t)].data() + static_cast<size_t>(r) * row,
                  row);
        continue;
      }
      // Whole, a row split's parts one after another, or a replicated
      // tensor from part 0; in pieces of at most 64 MiB, never a whole
      // tensor in memory.
      const int from_parts = parts > 1 && tensor.split_dim == 0 ? parts : 1;
      for (int t = 0; t < from_parts; ++t)
        for (int64_t at = 0; at < numel;) {
          const int64_t count =
              std::min<int64_t>(numel - at, (int64_t{64} << 20) / static_cast<int64_t>(element));
          buffer.resize(static_cast<size_t>(count) * element);
          files.read(t, g, params, tensor.offset + at, tensor.offset + at + count, element,
                     buffer.data(), no_check);
          write(tensor.name, buffer.data(), buffer.size());
          at += count;
        }
    }
  }
  writer.finish();
  std::ifstream config(dir + "/config.json", std::ios::binary);
  if (!config) throw UsageError(dir + "/config.json: cannot open (a sharded checkpoint holds one)");
  std::ostringstream text;
  text << config.rdbuf();
  write_file_atomically(out + "/config.json", text.str());
  return bytes;
}

}  // namespace headroom
