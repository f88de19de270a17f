#include "train/optimizer.h"

#include <algorithm>

#include "backend/common/dynamic_map.h"
#include "util/error.h"

namespace headroom {

std::string_view name_of(MasterWeights master) {
  switch (master) {
    case MasterWeights::kFp32:
      return "fp32";
    case MasterWeights::kBf16:
      return "bf16";
    case MasterWeights::kNone:
      return "none";
  }
  return "?";
}

namespace {

bool is_decayed(const std::string& name) {
  const bool is_norm = name.find("norm.weight") != std::string::npos ||
                       name.find("layernorm.weight") != std::string::npos;
  const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  return !is_norm && !is_bias;
}

std::vector<GroupShard> whole(const std::vector<GroupLayout>& layouts) {
  std::vector<GroupShard> shards;
  for (const GroupLayout& layout : layouts)
    shards.push_back(GroupShard::of(layout.numel, 0, 1));
  return shards;
}

std::vector<Tensor> flats(std::vector<FlatGroup>& groups) {
  std::vector<Tensor> tensors;
  for (FlatGroup& group : groups)
    tensors.push_back(group.flat);
  return tensors;
}

int64_t blocks_of(int64_t n) {
  return (n + kQuantBlock - 1) / kQuantBlock;
}

}  // namespace

AdamW::AdamW(Backend& backend, const std::vector<GroupLayout>& layouts,
             std::vector<FlatGroup>& params, const AdamWConfig& config)
    : AdamW(backend, layouts, whole(layouts), flats(params), config, false) {}

AdamW::AdamW(Backend& backend, const std::vector<GroupLayout>& layouts,
             std::vector<GroupShard> shards, std::vector<Tensor> param_shards,
             const AdamWConfig& config, bool padded, Backend* offload)
    : backend_(backend),
      states_(offload ? *offload : backend),
      offloaded_(offload != nullptr),
      layouts_(layouts),
      config_(config),
      shards_(std::move(shards)),
      params_(std::move(param_shards)) {
  HR_CHECK(shards_.size() == layouts.size() && params_.size() == layouts.size(),
           "one shard per parameter group");
  PhaseScope scope(backend.allocator(), Phase::kInit);
  PhaseScope states_scope(states_.allocator(), Phase::kInit);
  // Mixed precision (bf16 parameters) is the model's, whole; a shard that
  // is all padding has no parameter to tell.
  mixed_ = std::any_of(params_.begin(), params_.end(),
                       [](const Tensor& t) { return t.defined() && t.dtype() != DType::kF32; });
  // The master's element type: bf16 parameters take optimizer.master_dtype;
  // fp32 ones are their own master, except offloaded, where the host keeps
  // an fp32 copy of them.
  DType master_dtype = DType::kF32;
  bool has_master = offloaded_;
  if (mixed_) {
    has_master = config_.master != MasterWeights::kNone;
    master_dtype = config_.master == MasterWeights::kBf16 ? DType::kBF16 : DType::kF32;
  }
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    const GroupShard& shard = shards_[g];
    HR_CHECK(shard.numel() == 0 || params_[g].numel() == shard.numel(),
             layout.name + ": the parameter shard has the shard's size");
    GroupState state;
    // A frozen group (the base under LoRA) is never updated: no state.
    if (!layout.trainable) {
      groups_.push_back(std::move(state));
      continue;
    }
    // Where each parameter's part lies in the states: fp32 moments packed
    // in one buffer, 8-bit codes in another, absmax blocks per part.
    int64_t n32 = 0, n8 = 0, blocks = 0;
    for (size_t i = 0; i < layout.specs.size(); ++i) {
      const int64_t numel = numel_of(layout.specs[i].shape);
      const int64_t begin = std::max(layout.offsets[i], shard.begin);
      const int64_t end = std::min(layout.offsets[i] + numel, shard.end);
      if (begin >= end) continue;
      Part part;
      part.spec = i;
      part.from = begin - shard.begin;
      part.to = end - shard.begin;
      // bitsandbytes decides on the whole parameter (p.numel() <
      // min_8bit_size), so every rank of a sharded run decides alike.
      part.eight_bit = config_.eight_bit && numel >= config_.min_8bit_size;
      if (part.eight_bit) {
        part.at = n8;
        part.block = blocks;
        n8 += part.to - part.from;
        blocks += blocks_of(part.to - part.from);
      } else {
        part.at = n32;
        n32 += part.to - part.from;
      }
      state.parts.push_back(part);
    }
    if (shard.numel() > 0) {
      if (has_master) {
        if (!offloaded_) {
          state.master =
              backend.cast(params_[g], master_dtype, Category::kOptim, layout.name + ".master");
        } else {
          Tensor staged = states_.empty({shard.numel()}, params_[g].dtype(), Category::kComm,
                                        layout.name + ".offload.param");
          to_states(params_[g], staged);
          state.master =
              states_.cast(staged, master_dtype, Category::kOptim, layout.name + ".master");
        }
      }
      auto zeros = [&](int64_t n, DType dtype, const std::string& tag) {
        Tensor t = states_.empty({n}, dtype, Category::kOptim, layout.name + tag);
        states_.fill(t, 0.0f);
        return t;
      };
      if (n32 > 0) {
        state.m = zeros(n32, DType::kF32, ".adam_m");
        state.v = zeros(n32, DType::kF32, ".adam_v");
      }
      // bitsandbytes starts the codes at 0 and the absmax at 0: every value
      // dequantizes to 0.
      if (n8 > 0) {
        state.m8 = zeros(n8, DType::kU8, ".adam_m8");
        state.v8 = zeros(n8, DType::kU8, ".adam_v8");
        state.m_absmax = zeros(blocks, DType::kF32, ".adam_m8.absmax");
        state.v_absmax = zeros(blocks, DType::kF32, ".adam_v8.absmax");
      }
    }
    if (padded && shard.padding() > 0) {
      // The padding holds states like the rest of the shard: a master and
      // fp32 moments, or 8-bit moments with their absmax when the group's
      // last parameter (the one the padding extends) is 8-bit.
      const bool last_eight_bit = config_.eight_bit && !layout.specs.empty() &&
                                  numel_of(layout.specs.back().shape) >= config_.min_8bit_size;
      const int64_t pad = shard.padding();
      int64_t bytes = has_master ? pad * static_cast<int64_t>(size_of(master_dtype)) : 0;
      bytes += last_eight_bit ? 2 * pad + 2 * blocks_of(pad) * 4 : 8 * pad;
      state.padding =
          states_.empty({bytes}, DType::kU8, Category::kOptim, layout.name + ".zero_padding");
    }
    groups_.push_back(std::move(state));
  }
}

void AdamW::to_states(const Tensor& src, Tensor& dst) {
  if (backend_.kind() == BackendKind::kMeta || states_.kind() == BackendKind::kMeta) return;
  backend_.copy_to_host(src, dst.raw());
}

void AdamW::from_states(const Tensor& src, Tensor& dst) {
  if (backend_.kind() == BackendKind::kMeta || states_.kind() == BackendKind::kMeta) return;
  backend_.copy_from_host(src.raw(), dst);
}

std::vector<std::pair<std::string, Tensor*>> AdamW::state() {
  std::vector<std::pair<std::string, Tensor*>> state;
  for (size_t g = 0; g < layouts_.size(); ++g) {
    GroupState& s = groups_[g];
    const std::string& name = layouts_[g].name;
    for (const auto& [suffix, tensor] : {std::pair<const char*, Tensor*>{".adam_m", &s.m},
                                         {".adam_v", &s.v},
                                         {".adam_m8", &s.m8},
                                         {".adam_v8", &s.v8},
                                         {".adam_m8.absmax", &s.m_absmax},
                                         {".adam_v8.absmax", &s.v_absmax}})
      if (tensor->defined()) state.emplace_back(name + suffix, tensor);
    // An fp32 model's offloaded master is a copy of its parameters, which
    // the checkpoint's weights hold already.
    if (s.master.defined() && mixed_) state.emplace_back(name + ".master", &s.master);
  }
  return state;
}

void AdamW::step(const std::vector<Tensor>& grad_shards, float lr, float grad_scale, int64_t step) {
  HR_CHECK(grad_shards.size() == layouts_.size(), "one gradient shard per parameter group");
  PhaseScope states_scope(states_.allocator(), Phase::kOptimizer);
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const GroupLayout& layout = layouts_[g];
    const GroupShard& shard = shards_[g];
    GroupState& s = groups_[g];
    if (shard.numel() == 0 || !layout.trainable) continue;
    // Where the update happens: on the parameters' backend, or offloaded on
    // the states' backend over copies of the gradients (and, for bf16, of
    // the parameters: rounded from the master, or updated in place when
    // there is none); an fp32 model updates its master.
    Tensor params = params_[g], grads = grad_shards[g], master = s.master;
    if (offloaded_) {
      grads = states_.empty({shard.numel()}, grad_shards[g].dtype(), Category::kComm,
                            layout.name + ".offload.grad");
      to_states(grad_shards[g], grads);
      if (mixed_) {
        params = states_.empty({shard.numel()}, params_[g].dtype(), Category::kComm,
                               layout.name + ".offload.param");
        if (!master.defined()) to_states(params_[g], params);
      } else {
        params = s.master;
        master = Tensor();
      }
    }
    for (const Part& part : s.parts) {
      // The part of the parameter inside this rank's shard, as flat 1-D
      // views of every buffer.
      Tensor param = params.rows(part.from, part.to);
      Tensor grad = grads.rows(part.from, part.to);
      Tensor master_part = master.defined() ? master.rows(part.from, part.to) : Tensor();
      AdamWParams p;
      p.lr = lr;
      p.beta1 = config_.beta1;
      p.beta2 = config_.beta2;
      p.eps = config_.eps;
      p.weight_decay = is_decayed(layout.specs[part.spec].name) ? config_.weight_decay : 0.0f;
      p.step = step;
      p.grad_scale = grad_scale;
      const int64_t n = part.to - part.from;
      if (part.eight_bit) {
        Tensor m = s.m8.rows(part.at, part.at + n);
        Tensor v = s.v8.rows(part.at, part.at + n);
        Tensor m_absmax = s.m_absmax.rows(part.block, part.block + blocks_of(n));
        Tensor v_absmax = s.v_absmax.rows(part.block, part.block + blocks_of(n));
        states_.adamw8bit_update(param, master_part, grad, m, v, m_absmax, v_absmax, p);
      } else {
        Tensor m = s.m.rows(part.at, part.at + n);
        Tensor v = s.v.rows(part.at, part.at + n);
        states_.adamw_update(param, master_part, grad, m, v, p);
      }
    }
    if (offloaded_) from_states(params, params_[g]);
  }
}

}  // namespace headroom
