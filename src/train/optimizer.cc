#include "train/optimizer.h"

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
             std::vector<FlatGroup>& params, const AdamWConfig& config)
    : backend_(backend), layouts_(layouts), params_(params), config_(config) {
  PhaseScope scope(backend.allocator(), Phase::kInit);
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    FlatGroup master;
    if (params[g].flat.dtype() != DType::kF32) {
      // Only the flat buffer: step() takes per-parameter row ranges of it.
      master.flat =
          backend.cast(params[g].flat, DType::kF32, Category::kOptim, layout.name + ".master");
    }
    master_.push_back(std::move(master));
    m_.push_back(FlatGroup::allocate(backend, layout, DType::kF32, Category::kOptim,
                                     layout.name + ".adam_m"));
    backend.fill(m_.back().flat, 0.0f);
    v_.push_back(FlatGroup::allocate(backend, layout, DType::kF32, Category::kOptim,
                                     layout.name + ".adam_v"));
    backend.fill(v_.back().flat, 0.0f);
  }
}

std::vector<std::pair<std::string, Tensor*>> AdamW::state() {
  std::vector<std::pair<std::string, Tensor*>> state;
  for (size_t g = 0; g < layouts_.size(); ++g) {
    state.emplace_back(layouts_[g].name + ".adam_m", &m_[g].flat);
    state.emplace_back(layouts_[g].name + ".adam_v", &v_[g].flat);
    if (master_[g].flat.defined())
      state.emplace_back(layouts_[g].name + ".master", &master_[g].flat);
  }
  return state;
}

void AdamW::step(std::vector<FlatGroup>& grads, float lr, float grad_scale, int64_t step) {
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const GroupLayout& layout = layouts_[g];
    for (size_t i = 0; i < layout.specs.size(); ++i) {
      // Flat 1-D views of one parameter in every buffer of the group.
      const int64_t begin = layout.offsets[i], end = begin + numel_of(layout.specs[i].shape);
      Tensor param = params_[g].flat.rows(begin, end);
      Tensor grad = grads[g].flat.rows(begin, end);
      Tensor m = m_[g].flat.rows(begin, end);
      Tensor v = v_[g].flat.rows(begin, end);
      Tensor master = master_[g].flat.defined() ? master_[g].flat.rows(begin, end) : Tensor();
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
