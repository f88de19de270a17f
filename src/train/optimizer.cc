#include "train/optimizer.h"

#include <algorithm>

namespace headroom {

namespace {

bool is_decayed(const std::string& name) {
  const bool is_norm = name.find("norm.weight") != std::string::npos ||
                       name.find("layernorm.weight") != std::string::npos;
  const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  return !is_norm && !is_bias;
}

}  // namespace

AdamW::AdamW(Backend& backend, const std::vector<GroupLayout>& layouts,
             std::vector<FlatGroup>& params, const AdamWConfig& config, OptimizerSharding sharding)
    : backend_(backend), layouts_(layouts), params_(params), config_(config) {
  PhaseScope scope(backend.allocator(), Phase::kInit);
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    const GroupShard shard = GroupShard::of(layout.numel, sharding.rank, sharding.world_size);
    shards_.push_back(shard);
    const bool mixed = params[g].flat.dtype() != DType::kF32;
    Tensor master, m, v, padding;
    if (shard.numel() > 0) {
      // Only flat buffers: step() takes per-parameter row ranges of them.
      if (mixed)
        master = backend.cast(params[g].flat.rows(shard.begin, shard.end), DType::kF32,
                              Category::kOptim, layout.name + ".master");
      m = backend.empty({shard.numel()}, DType::kF32, Category::kOptim, layout.name + ".adam_m");
      backend.fill(m, 0.0f);
      v = backend.empty({shard.numel()}, DType::kF32, Category::kOptim, layout.name + ".adam_v");
      backend.fill(v, 0.0f);
    }
    if (shard.padding() > 0 && sharding.world_size > 1)
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

void AdamW::step(std::vector<FlatGroup>& grads, float lr, float grad_scale, int64_t step) {
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const GroupLayout& layout = layouts_[g];
    const GroupShard& shard = shards_[g];
    for (size_t i = 0; i < layout.specs.size(); ++i) {
      // The part of parameter i inside this rank's shard, as flat 1-D views
      // of every buffer: parameters and gradients are whole groups, the
      // states start at the shard.
      const int64_t begin = std::max(layout.offsets[i], shard.begin);
      const int64_t end = std::min(layout.offsets[i] + numel_of(layout.specs[i].shape), shard.end);
      if (begin >= end) continue;
      const int64_t from = begin - shard.begin, to = end - shard.begin;
      Tensor param = params_[g].flat.rows(begin, end);
      Tensor grad = grads[g].flat.rows(begin, end);
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

double grad_sum_of_squares(Backend& backend, std::vector<FlatGroup>& grads) {
  Tensor total = backend.empty({1}, DType::kF32, Category::kWorkspace, "optimizer.grad_norm");
  backend.fill(total, 0.0f);
  for (FlatGroup& g : grads)
    backend.sum_squares(g.flat, total);
  float host = 0;
  backend.copy_to_host(total, &host);
  return host;
}

}  // namespace headroom
