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
  SafetensorsWriter writer(dir + "/" + shard_file_name(rank), {{"format", "headroom-sharded"}});
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
    for (size_t i = 0; i < layouts[g].specs.size(); ++i)
      tensors.push_back({{"name", layouts[g].specs[i].name},
                         {"shape", layouts[g].specs[i].shape},
                         {"offset", layouts[g].offsets[i]}});
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

void load_sharded_weights(Backend& backend, Transformer& model, const ShardIndex& index) {
  const bool meta = backend.kind() == BackendKind::kMeta;
  std::vector<std::unique_ptr<SafetensorsIndex>> files(static_cast<size_t>(index.world_size));
  std::vector<char> host;
  for (size_t g = 0; g < model.num_base_groups(); ++g) {
    model.begin_params_write(g);
    if (!meta) {
      Tensor& flat = model.params()[g].flat;
      const size_t element = size_of(flat.dtype());
      host.assign(flat.nbytes(), 0);
      const ShardIndex::Group& group = index.groups[g];
      for (int r = 0; r < index.world_size; ++r) {
        const GroupShard& range = group.ranges[static_cast<size_t>(r)];
        if (range.numel() == 0) continue;
        auto& file = files[static_cast<size_t>(r)];
        if (!file) file = std::make_unique<SafetensorsIndex>(SafetensorsIndex::open(index.file(r)));
        const SafetensorsEntry& entry = file->at(group.name + ".params");
        file->read_raw(entry, host.data() + static_cast<size_t>(range.begin) * element);
      }
      backend.copy_from_host(host.data(), flat);
    }
    model.end_params_write(g);
  }
}

void load_optimizer_resharded(AdamW& optimizer, const std::vector<GroupLayout>& layouts,
                              const std::string& dir, const TrainState& state, int rank,
                              int world_size, bool sharded_optimizer, int tensor_rank) {
  // The old files and, per file and group, the elements they cover.
  std::vector<std::string> files;
  std::vector<std::vector<GroupShard>> ranges;  // [file][group]
  int old_world = 1;
  bool old_sharded_optimizer = false;  // each old rank held its own optimizer shard
  if (state.sharded_format) {
    const ShardIndex index = read_shard_index(dir);
    old_world = index.world_size;
    old_sharded_optimizer = index.zero_stage >= 1 && index.world_size > 1;
    for (int r = 0; r < index.world_size; ++r) {
      files.push_back(index.file(r));
      std::vector<GroupShard> of_file;
      for (const ShardIndex::Group& group : index.groups)
        of_file.push_back(group.ranges[static_cast<size_t>(r)]);
      ranges.push_back(std::move(of_file));
    }
  } else {
    const int64_t shards = state.optimizer_shards;
    old_world = static_cast<int>(shards);
    old_sharded_optimizer = shards > 1;
    for (int r = 0; r < shards; ++r) {
      // parallel.tensor: this part's files (the sizes match: check_resume).
      files.push_back(optimizer_file(dir, r, shards, tensor_rank, state.tensor_parallel));
      std::vector<GroupShard> of_file;
      for (const GroupLayout& layout : layouts)
        of_file.push_back(GroupShard::of(layout.numel, r, static_cast<int>(shards)));
      ranges.push_back(std::move(of_file));
    }
  }
  for (const std::string& file : files)
    if (!fs::exists(file))
      throw UsageError(file + ": missing: the checkpoint's optimizer state was written by " +
                       std::to_string(files.size()) + " rank file(s)");
  std::vector<std::unique_ptr<SafetensorsIndex>> opened(files.size());
  auto file_at = [&](size_t f) -> const SafetensorsIndex& {
    if (!opened[f])
      opened[f] = std::make_unique<SafetensorsIndex>(SafetensorsIndex::open(files[f]));
    return *opened[f];
  };
  Backend& states = optimizer.state_backend();
  std::vector<char> host;
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
    if (elementwise(*tensor, mine)) {
      for (size_t f = 0; f < files.size(); ++f) {
        const GroupShard& held = ranges[f][g];
        const auto [begin, end] = overlap(held, mine);
        if (begin >= end) continue;
        const SafetensorsEntry& entry = file_at(f).at(name);
        check_dtype(entry);
        if (entry.numel() != held.numel())
          throw UsageError(entry.file + ": " + name + ": " + std::to_string(entry.numel()) +
                           " values, not one per parameter of its shard (" +
                           std::to_string(held.numel()) +
                           "): it cannot be resharded; resume with the world size (" +
                           std::to_string(old_world) + ") and zero.stage that wrote it");
        file_at(f).read_range(entry, static_cast<uint64_t>(begin - held.begin) * element,
                              static_cast<uint64_t>(end - begin) * element,
                              host.data() + static_cast<size_t>(begin - mine.begin) * element);
      }
    } else {
      // Kept as the rank held it: only the same sharding has it (or, with
      // replicated states on both sides, any rank's copy).
      const bool same = old_sharded_optimizer == sharded_optimizer &&
                        (!sharded_optimizer || old_world == world_size);
      if (!same)
        throw UsageError(files.front() + ": " + name +
                         " is not one value per parameter, so it cannot be resharded: resume "
                         "with the world size (" +
                         std::to_string(old_world) + ") and zero.stage that wrote it");
      const size_t f = sharded_optimizer ? static_cast<size_t>(rank) : 0;
      const SafetensorsEntry& entry = file_at(f).at(name);
      check_dtype(entry);
      if (entry.shape != tensor->shape())
        throw UsageError(entry.file + ": " + name + ": shape " + shape_to_string(entry.shape) +
                         ", expected " + shape_to_string(tensor->shape()));
      file_at(f).read_raw(entry, host.data());
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
  std::vector<SafetensorsIndex> files;
  for (int r = 0; r < index.world_size; ++r)
    files.push_back(SafetensorsIndex::open(index.file(r)));
  const SafetensorsDType dtype = *parse_safetensors_dtype(index.dtype);
  const uint64_t element = safetensors_size(dtype);
  // What save_weights writes for a consolidated checkpoint: the same
  // metadata, the same tensors in the same order, so the same bytes.
  SafetensorsWriter writer(target, {{"format", "pt"}, {"created_by", "headroom"}});
  for (const ShardIndex::Group& group : index.groups)
    for (const ShardIndex::Tensor& tensor : group.tensors)
      writer.declare(tensor.name, dtype, tensor.shape);
  std::vector<char> buffer;
  uint64_t bytes = 0;
  for (const ShardIndex::Group& group : index.groups) {
    for (const ShardIndex::Tensor& tensor : group.tensors) {
      GroupShard span;
      span.begin = tensor.offset;
      span.end = tensor.offset + numel_of(tensor.shape);
      for (int r = 0; r < index.world_size; ++r) {
        const GroupShard& held = group.ranges[static_cast<size_t>(r)];
        const auto [begin, end] = overlap(held, span);
        if (begin >= end) continue;
        const SafetensorsEntry& entry = files[static_cast<size_t>(r)].at(group.name + ".params");
        // In pieces of at most 64 MiB: never a whole tensor in memory.
        for (int64_t at = begin; at < end;) {
          const int64_t count =
              std::min<int64_t>(end - at, (int64_t{64} << 20) / static_cast<int64_t>(element));
          buffer.resize(static_cast<size_t>(count) * element);
          files[static_cast<size_t>(r)].read_range(entry,
                                                   static_cast<uint64_t>(at - held.begin) * element,
                                                   buffer.size(), buffer.data());
          writer.write_part(tensor.name, buffer.data(), buffer.size());
          bytes += buffer.size();
          at += count;
        }
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
