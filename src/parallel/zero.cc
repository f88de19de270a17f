#include "parallel/zero.h"

#include <algorithm>
#include <string>
#include <utility>

#include "util/error.h"

namespace headroom {

Zero::Zero(Backend& backend, Communicator& comm, DType dtype, const ZeroOptions& options)
    : backend_(backend), comm_(comm), dtype_(dtype), options_(options) {
  HR_CHECK(options.stage >= 0 && options.stage <= 3, "zero.stage is 0..3");
  HR_CHECK(options.prefetch >= 0, "zero.prefetch is not negative");
}

Zero::~Zero() {
  for (size_t g = 0; g < pending_.size(); ++g) {
    try {
      settle(g);
    } catch (const std::exception&) {
      // A failing device at teardown: nothing left to order.
    }
  }
}

void Zero::attach(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
                  std::vector<FlatGroup>& grads) {
  layouts_ = &layouts;
  params_ = &params;
  grads_ = &grads;
  shards_.clear();
  for (const GroupLayout& layout : layouts)
    shards_.push_back(shards_optimizer()
                          ? GroupShard::of(layout.numel, comm_.rank(), comm_.world_size())
                          : GroupShard::of(layout.numel, 0, 1));
  param_shards_.assign(layouts.size(), Tensor());
  grad_shards_.assign(layouts.size(), Tensor());
  param_padding_.assign(layouts.size(), Tensor());
  grad_padding_.assign(layouts.size(), Tensor());
  acquired_.assign(layouts.size(), false);
  pending_.assign(layouts.size(), PendingGather{});
}

void Zero::adopt(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
                 std::vector<FlatGroup>& grads) {
  HR_CHECK(options_.stage <= 1,
           "a model that allocated its own groups can only be managed at zero.stage 0 or 1");
  HR_CHECK(params.size() == layouts.size() && grads.size() == layouts.size(),
           "one parameter and one gradient group per layout");
  attach(layouts, params, grads);
}

void Zero::bind(const std::vector<GroupLayout>& layouts, std::vector<FlatGroup>& params,
                std::vector<FlatGroup>& grads) {
  attach(layouts, params, grads);
  const bool several = comm_.world_size() > 1;
  // The same order as a model that allocates itself: every parameter group,
  // then every gradient group.
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    if (options_.stage <= 2) {
      params[g] =
          FlatGroup::allocate(backend_, layout, dtype_, Category::kParam, layout.name + ".params");
      continue;
    }
    const GroupShard& shard = shards_[g];
    if (shard.numel() > 0)
      param_shards_[g] =
          backend_.empty({shard.numel()}, dtype_, Category::kParam, layout.name + ".params.shard");
    // ZeRO pads every group to a multiple of the world size: this rank's
    // part of the padding is real memory.
    if (several && shard.padding() > 0)
      param_padding_[g] = backend_.empty({shard.padding()}, dtype_, Category::kParam,
                                         layout.name + ".params.zero_padding");
  }
  for (size_t g = 0; g < layouts.size(); ++g) {
    const GroupLayout& layout = layouts[g];
    if (!layout.trainable) continue;
    if (options_.stage <= 1) {
      grads[g] =
          FlatGroup::allocate(backend_, layout, dtype_, Category::kGrad, layout.name + ".grads");
      backend_.fill(grads[g].flat, 0.0f);
      continue;
    }
    const GroupShard& shard = shards_[g];
    if (shard.numel() > 0) {
      grad_shards_[g] =
          backend_.empty({shard.numel()}, dtype_, Category::kGrad, layout.name + ".grads.shard");
      backend_.fill(grad_shards_[g], 0.0f);
    }
    if (several && shard.padding() > 0)
      grad_padding_[g] = backend_.empty({shard.padding()}, dtype_, Category::kGrad,
                                        layout.name + ".grads.zero_padding");
  }
}

std::vector<int64_t> Zero::counts(size_t g) const {
  std::vector<int64_t> counts(static_cast<size_t>(comm_.world_size()));
  for (int r = 0; r < comm_.world_size(); ++r)
    counts[static_cast<size_t>(r)] =
        GroupShard::of((*layouts_)[g].numel, r, comm_.world_size()).numel();
  return counts;
}

void Zero::settle(size_t g) {
  comm_.wait_for(std::exchange(pending_[g], PendingGather{}));
}

void Zero::gather(size_t g, bool ahead) {
  Allocator& allocator = backend_.allocator();
  PhaseScope scope(allocator, Phase::kGather, allocator.layer());
  const GroupLayout& layout = (*layouts_)[g];
  FlatGroup whole =
      FlatGroup::allocate(backend_, layout, dtype_, Category::kParam, layout.name + ".params");
  const GroupShard& shard = shards_[g];
  if (shard.numel() > 0) {
    Tensor mine = whole.flat.rows(shard.begin, shard.end);
    backend_.copy(param_shards_[g], mine);
  }
  if (ahead)
    pending_[g] = comm_.start_all_gather_in_place(whole.flat, counts(g));
  else
    comm_.all_gather_in_place(whole.flat, counts(g));
  (*params_)[g] = std::move(whole);
}

void Zero::acquire_params(size_t g, std::span<const size_t> ahead) {
  if (options_.stage < 3) return;
  HR_CHECK(!acquired_[g], (*layouts_)[g].name + ": parameters acquired twice");
  if (!(*params_)[g].flat.defined())
    gather(g, false);
  else
    settle(g);  // fetched ahead: the kernels queued from here on need it
  acquired_[g] = true;
  // Fetched ahead: started now (on a device communicator, overlapping the
  // kernels queued until their own acquire), kept until their use releases them.
  for (size_t k = 0; k < ahead.size() && k < static_cast<size_t>(options_.prefetch); ++k)
    if (!(*params_)[ahead[k]].flat.defined()) gather(ahead[k], true);
}

void Zero::release_params(size_t g) {
  if (options_.stage < 3) return;
  HR_CHECK(acquired_[g], (*layouts_)[g].name + ": parameters released without being acquired");
  acquired_[g] = false;
  // acquire_params settled it: a group is fetched ahead only while absent.
  HR_CHECK(pending_[g].id == 0, (*layouts_)[g].name + ": released with its gather pending");
  (*params_)[g] = FlatGroup{};
}

void Zero::begin_params_write(size_t g) {
  if (options_.stage < 3) return;
  HR_CHECK(!acquired_[g], (*layouts_)[g].name + ": parameters written while in use");
  settle(g);  // a prefetched copy about to be replaced
  const GroupLayout& layout = (*layouts_)[g];
  (*params_)[g] =
      FlatGroup::allocate(backend_, layout, dtype_, Category::kParam, layout.name + ".params");
  acquired_[g] = true;
}

void Zero::end_params_write(size_t g) {
  if (options_.stage < 3) return;
  const GroupShard& shard = shards_[g];
  if (shard.numel() > 0)
    backend_.copy((*params_)[g].flat.rows(shard.begin, shard.end), param_shards_[g]);
  release_params(g);
}

void Zero::acquire_grads(size_t g) {
  HR_CHECK((*layouts_)[g].trainable, (*layouts_)[g].name + ": a frozen group has no gradients");
  if (options_.stage < 2) return;
  HR_CHECK(!(*grads_)[g].flat.defined(), (*layouts_)[g].name + ": gradients acquired twice");
  const GroupLayout& layout = (*layouts_)[g];
  (*grads_)[g] =
      FlatGroup::allocate(backend_, layout, dtype_, Category::kGrad, layout.name + ".grads");
  backend_.fill((*grads_)[g].flat, 0.0f);
}

void Zero::release_grads(size_t g) {
  if (options_.stage < 2) return;
  FlatGroup& whole = (*grads_)[g];
  HR_CHECK(whole.flat.defined(), (*layouts_)[g].name + ": gradients released twice");
  {
    Allocator& allocator = backend_.allocator();
    PhaseScope scope(allocator, Phase::kReduce, allocator.layer());
    comm_.reduce_scatter_sum_in_place(backend_, whole.flat, counts(g),
                                      (*layouts_)[g].name + ".grad");
    const GroupShard& shard = shards_[g];
    if (shard.numel() > 0)
      backend_.add(grad_shards_[g], whole.flat.rows(shard.begin, shard.end), grad_shards_[g]);
  }
  whole = FlatGroup{};
}

Tensor Zero::param_shard(size_t g) {
  if (options_.stage == 3) return param_shards_[g];
  const GroupShard& shard = shards_[g];
  return shard.numel() > 0 ? (*params_)[g].flat.rows(shard.begin, shard.end) : Tensor();
}

Tensor Zero::grad_shard(size_t g) {
  if (!(*layouts_)[g].trainable) return Tensor();
  if (options_.stage >= 2) return grad_shards_[g];
  const GroupShard& shard = shards_[g];
  return shard.numel() > 0 ? (*grads_)[g].flat.rows(shard.begin, shard.end) : Tensor();
}

void Zero::finish_grads() {
  if (options_.stage >= 2 || comm_.world_size() == 1) return;
  PhaseScope scope(backend_.allocator(), Phase::kReduce);
  for (size_t g = 0; g < layouts_->size(); ++g)
    if ((*layouts_)[g].trainable)
      comm_.all_reduce_sum(backend_, (*grads_)[g].flat, (*layouts_)[g].name + ".grad");
}

double Zero::grad_sum_of_squares(Communicator* tensor_group,
                                 const std::function<bool(size_t g, size_t i)>& split) {
  const bool by_view = tensor_group && tensor_group->world_size() > 1;
  // [0]: replicated (or every) gradient, [1]: the split ones.
  Tensor totals[2];
  for (int k = 0; k < (by_view ? 2 : 1); ++k) {
    totals[k] = backend_.empty({1}, DType::kF32, Category::kWorkspace, "optimizer.grad_norm");
    backend_.fill(totals[k], 0.0f);
  }
  for (size_t g = 0; g < layouts_->size(); ++g) {
    Tensor grad = grad_shard(g);
    if (!grad.defined()) continue;
    if (!by_view) {
      backend_.sum_squares(grad, totals[0]);
      continue;
    }
    // The views' element ranges that fall in this rank's shard.
    const GroupLayout& layout = (*layouts_)[g];
    const GroupShard& shard = shards_[g];
    for (size_t i = 0; i < layout.specs.size(); ++i) {
      if (layout.offsets[i] < 0) continue;
      const int64_t begin = std::max(layout.offsets[i], shard.begin);
      const int64_t end = std::min(layout.offsets[i] + numel_of(layout.specs[i].shape), shard.end);
      if (begin >= end) continue;
      backend_.sum_squares(grad.rows(begin - shard.begin, end - shard.begin),
                           totals[split(g, i) ? 1 : 0]);
    }
  }
  float host[2] = {0, 0};
  for (int k = 0; k < (by_view ? 2 : 1); ++k)
    backend_.copy_to_host(totals[k], &host[k]);
  double sum[2] = {host[0], host[1]};
  // At stage 0 every rank holds every (reduced) gradient already.
  if (shards_optimizer()) comm_.all_reduce_sum(std::span<double>(sum, by_view ? 2 : 1));
  if (by_view) tensor_group->all_reduce_sum(std::span<double>(&sum[1], 1));
  return sum[0] + sum[1];
}

void Zero::finish_step() {
  if ((options_.stage != 1 && options_.stage != 2) || comm_.world_size() == 1) return;
  PhaseScope scope(backend_.allocator(), Phase::kGather);
  // A frozen group never changes: nothing to put back together.
  for (size_t g = 0; g < layouts_->size(); ++g)
    if ((*layouts_)[g].trainable) comm_.all_gather_in_place((*params_)[g].flat, counts(g));
}

void Zero::zero_grads() {
  for (size_t g = 0; g < layouts_->size(); ++g) {
    if (!(*layouts_)[g].trainable) continue;
    Tensor& grad = options_.stage >= 2 ? grad_shards_[g] : (*grads_)[g].flat;
    if (grad.defined()) backend_.fill(grad, 0.0f);
  }
}

size_t Zero::groups_in_flight() const {
  size_t n = 0;
  if (options_.stage == 3)
    for (const FlatGroup& group : *params_)
      n += group.flat.defined() ? 1 : 0;
  if (options_.stage >= 2)
    for (const FlatGroup& group : *grads_)
      n += group.flat.defined() ? 1 : 0;
  return n;
}

}  // namespace headroom
