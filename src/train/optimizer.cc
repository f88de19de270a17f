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
             const AdamWConfig& config, bool padded)
    : backend_(backend),
      layouts_(layouts),
      config_(config),
      shards_(std::move(shards)),
      params_(std::move(param_shards)) {
  HR_CHECK(shards_.size() == layouts.size() && params_.size() == layouts.size(),
           "one shard per parameter group");
  PhaseScope scope(backend.allocator(), Phase::kInit);
  // Mixed precision (bf16 parameters, fp32 master) is the model's, whole;
  // a shard that is all padding has no parameter to tell.
  const bool mixed = std::any_of(params_.begin(), params_.end(), [](const Tensor& t) {
    return t.defined() && t.dtype() != DType::kF32;
  });
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    const GroupShard& shard = shards_[g];
    HR_CHECK(shard.numel() == 0 || params_[g].numel() == shard.numel(),
             layout.name + ": the parameter shard has the shard's size");
    Tensor master, m, v, padding;
    if (shard.numel() > 0) {
      // Only flat buffers: step() takes per-parameter row ranges of them.
      if (mixed)
        master = backend.cast(params_[g], DType::kF32, Category::kOptim, layout.name + ".master");
      m = backend.empty({shard.numel()}, DType::kF32, Category::kOptim, layout.name + ".adam_m");
      backend.fill(m, 0.0f);
      v = backend.empty({shard.numel()}, DType::kF32, Category::kOptim, layout.name + ".adam_v");
      backend.fill(v, 0.0f);
    }
    if (padded && shard.padding() > 0)
      padding = backend.empty({shard.padding() * (mixed ? 3 : 2)}, DType::kF32, Category::kOptim,
                              layout.name + ".zero_padding");
    master_.push_back(std::move(master));
    m_.push_back(std::move(m));
    v_.push_back(std::move(v));
    padding_.push_back(std::move(padding));
  }
}

std::vector<std::pair<std::string, Tensor*>> AdamW::state() {
  std::vector<std::pair<std::string, Tensor*>> state;
  for (size_t g = 0; g < layouts_.size(); ++g) {
    if (!m_[g].defined()) continue;
    state.emplace_back(layouts_[g].name + ".adam_m", &m_[g]);
    state.emplace_back(layouts_[g].name + ".adam_v", &v_[g]);
    if (master_[g].defined()) state.emplace_back(layouts_[g].name + ".master", &master_[g]);
  }
  return state;
}

void AdamW::step(const std::vector<Tensor>& grad_shards, float lr, float grad_scale, int64_t step) {
  HR_CHECK(grad_shards.size() == layouts_.size(), "one gradient shard per parameter group");
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const GroupLayout& layout = layouts_[g];
    const GroupShard& shard = shards_[g];
    for (size_t i = 0; i < layout.specs.size(); ++i) {
      // The part of parameter i inside this rank's shard, as flat 1-D views
      // of every buffer (all of them start at the shard).
      const int64_t begin = std::max(layout.offsets[i], shard.begin);
      const int64_t end = std::min(layout.offsets[i] + numel_of(layout.specs[i].shape), shard.end);
      if (begin >= end) continue;
      const int64_t from = begin - shard.begin, to = end - shard.begin;
      Tensor param = params_[g].rows(from, to);
      Tensor grad = grad_shards[g].rows(from, to);
      Tensor m = m_[g].rows(from, to);
      Tensor v = v_[g].rows(from, to);
      Tensor master = master_[g].defined() ? master_[g].rows(from, to) : Tensor();
      AdamWParams p;
      p.lr = lr;
      p.beta1 = config_.beta1;
      p.beta2 = config_.beta2;
      p.eps = config_.eps;
      p.weight_decay = is_decayed(layout.specs[i].name) ? config_.weight_decay : 0.0f;
      p.step = step;
      p.grad_scale = grad_scale;
      backend_.adamw_update(param, master, grad, m, v, p);
    }
  }
}

}  // namespace headroom
