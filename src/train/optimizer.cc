#include "train/optimizer.h"

#include <algorithm>

#include "util/error.h"

namespace headroom {

namespace {

bool is_decayed(const std::string& name) {
  const bool is_norm = name.find("norm.weight") != std::string::npos ||
                       name.find("layernorm.weight") != std::string::npos;
  const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  return !is_norm && !is_bias;
}

}  // namespace

namespace {

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
  // Mixed precision (bf16 parameters, fp32 master) is the model's, whole;
  // a shard that is all padding has no parameter to tell.
  mixed_ = std::any_of(params_.begin(), params_.end(),
                       [](const Tensor& t) { return t.defined() && t.dtype() != DType::kF32; });
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    const GroupShard& shard = shards_[g];
    HR_CHECK(shard.numel() == 0 || params_[g].numel() == shard.numel(),
             layout.name + ": the parameter shard has the shard's size");
    Tensor master, m, v, padding;
    // A frozen group (the base under LoRA) is never updated: no state.
    if (!layout.trainable) {
      master_.emplace_back(), m_.emplace_back(), v_.emplace_back(), padding_.emplace_back();
      continue;
    }
    if (shard.numel() > 0) {
      // Only flat buffers: step() takes per-parameter row ranges of them.
      if (!offloaded_ && mixed_) {
        master = backend.cast(params_[g], DType::kF32, Category::kOptim, layout.name + ".master");
      } else if (offloaded_) {
        Tensor staged = states_.empty({shard.numel()}, params_[g].dtype(), Category::kComm,
                                      layout.name + ".offload.param");
        to_states(params_[g], staged);
        master = mixed_
                     ? states_.cast(staged, DType::kF32, Category::kOptim, layout.name + ".master")
                     : states_.empty({shard.numel()}, DType::kF32, Category::kOptim,
                                     layout.name + ".master");
        if (!mixed_) states_.copy(staged, master);
      }
      m = states_.empty({shard.numel()}, DType::kF32, Category::kOptim, layout.name + ".adam_m");
      states_.fill(m, 0.0f);
      v = states_.empty({shard.numel()}, DType::kF32, Category::kOptim, layout.name + ".adam_v");
      states_.fill(v, 0.0f);
    }
    if (padded && shard.padding() > 0)
      padding = states_.empty({shard.padding() * (mixed_ || offloaded_ ? 3 : 2)}, DType::kF32,
                              Category::kOptim, layout.name + ".zero_padding");
    master_.push_back(std::move(master));
    m_.push_back(std::move(m));
    v_.push_back(std::move(v));
    padding_.push_back(std::move(padding));
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
    if (!m_[g].defined()) continue;
    state.emplace_back(layouts_[g].name + ".adam_m", &m_[g]);
    state.emplace_back(layouts_[g].name + ".adam_v", &v_[g]);
    // An fp32 model's offloaded master is a copy of its parameters, which
    // the checkpoint's weights hold already.
    if (master_[g].defined() && mixed_)
      state.emplace_back(layouts_[g].name + ".master", &master_[g]);
  }
  return state;
}

void AdamW::step(const std::vector<Tensor>& grad_shards, float lr, float grad_scale, int64_t step) {
  HR_CHECK(grad_shards.size() == layouts_.size(), "one gradient shard per parameter group");
  PhaseScope states_scope(states_.allocator(), Phase::kOptimizer);
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const GroupLayout& layout = layouts_[g];
    const GroupShard& shard = shards_[g];
    if (shard.numel() == 0 || !layout.trainable) continue;
    // Where the update happens: on the parameters' backend, or offloaded on
    // the states' backend over copies of the gradients (and, for bf16, the
    // parameters the master rounds into); an fp32 model updates its master.
    Tensor params = params_[g], grads = grad_shards[g], master = master_[g];
    if (offloaded_) {
      grads = states_.empty({shard.numel()}, grad_shards[g].dtype(), Category::kComm,
                            layout.name + ".offload.grad");
      to_states(grad_shards[g], grads);
      if (mixed_) {
        params = states_.empty({shard.numel()}, params_[g].dtype(), Category::kComm,
                               layout.name + ".offload.param");
      } else {
        params = master_[g];
        master = Tensor();
      }
    }
    for (size_t i = 0; i < layout.specs.size(); ++i) {
      // The part of parameter i inside this rank's shard, as flat 1-D views
      // of every buffer (all of them start at the shard).
      const int64_t begin = std::max(layout.offsets[i], shard.begin);
      const int64_t end = std::min(layout.offsets[i] + numel_of(layout.specs[i].shape), shard.end);
      if (begin >= end) continue;
      const int64_t from = begin - shard.begin, to = end - shard.begin;
      Tensor param = params.rows(from, to);
      Tensor grad = grads.rows(from, to);
      Tensor m = m_[g].rows(from, to);
      Tensor v = v_[g].rows(from, to);
      Tensor master_part = master.defined() ? master.rows(from, to) : Tensor();
      AdamWParams p;
      p.lr = lr;
      p.beta1 = config_.beta1;
      p.beta2 = config_.beta2;
      p.eps = config_.eps;
      p.weight_decay = is_decayed(layout.specs[i].name) ? config_.weight_decay : 0.0f;
      p.step = step;
      p.grad_scale = grad_scale;
      states_.adamw_update(param, master_part, grad, m, v, p);
    }
    if (offloaded_) from_states(params, params_[g]);
  }
}

}  // namespace headroom
