#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/error.h"
#include "util/log.h"

namespace headroom {

namespace {

std::unique_ptr<Zero> adopting_zero(Backend& backend, Transformer& model, Communicator& comm) {
  auto zero = std::make_unique<Zero>(backend, comm, model.options().dtype, ZeroOptions{});
  zero->adopt(model.layouts(), model.params(), model.grads());
  return zero;
}

}  // namespace

Trainer::Trainer(Backend& backend, Transformer& model, AdamW& optimizer,
                 const TrainerOptions& options, Zero& zero)
    : backend_(backend),
      model_(model),
      optimizer_(optimizer),
      options_(options),
      zero_(zero),
      comm_(zero.comm()),
      scale_(options.loss_scale) {}

Trainer::Trainer(Backend& backend, Transformer& model, AdamW& optimizer,
                 const TrainerOptions& options)
    : backend_(backend),
      model_(model),
      optimizer_(optimizer),
      options_(options),
      single_(make_single_rank_comm()),
      own_zero_(adopting_zero(backend, model, *single_)),
      zero_(*own_zero_),
      comm_(*single_),
      scale_(options.loss_scale) {}

StepRecord Trainer::step(int64_t step, const std::vector<Batch>& micro_batches) {
  Allocator& allocator = backend_.allocator();
  const auto t0 = std::chrono::steady_clock::now();
  allocator.set_step(step);
  allocator.reset_peaks();
  const uint64_t allocations_at_start = allocator.stats().num_allocs;

  StepRecord record;
  record.step = step;
  int64_t counted = 0;
  int64_t padding = 0;
  for (const Batch& b : micro_batches) {
    counted += b.counted;
    padding += b.padding;
    record.tokens += b.counted;
    record.padded_tokens += b.size();
    record.longest_sample = std::max(record.longest_sample, b.longest);
    record.truncated_samples += b.truncated;
  }
  record.micro_batches = static_cast<int64_t>(micro_batches.size());
  record.padding_fraction = record.padded_tokens > 0 ? static_cast<double>(padding) /
                                                           static_cast<double>(record.padded_tokens)
                                                     : 0.0;

  Tensor loss_sum;
  {
    PhaseScope scope(allocator, Phase::kForward);
    loss_sum = backend_.empty({1}, DType::kF32, Category::kWorkspace, "loss.sum");
    backend_.fill(loss_sum, 0.0f);
  }
  // The mean over every counted token of the step, on all ranks together:
  // then summing the ranks' gradients gives exactly one rank's gradient of
  // the same micro-batches.
  double global_counted[1] = {static_cast<double>(counted)};
  comm_.all_reduce_sum(global_counted);
  // d(loss)/d(loss_sum), times the loss scale: the gradients carry it until
  // the norm, the clip and the update divide it out.
  const double scale = scale_;
  record.loss_scale = scale;
  const float loss_scale =
      global_counted[0] > 0 ? static_cast<float>(scale / global_counted[0]) : 0.0f;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const Batch& b = micro_batches[i];
    // Randomness (LoRA dropout) per micro-batch of the data: a resumed run
    // draws what the uninterrupted one would have, and a run on another
    // world size (batch.global_micro_batches) or in a tensor-parallel group
    // draws the same for the same micro-batch. A batch built by hand has
    // no place in the data: per step, rank and micro-batch then.
    model_.set_random_stream(
        b.bin >= 0 ? (static_cast<uint64_t>(b.epoch) << 40) ^ static_cast<uint64_t>(b.bin)
                   : ((static_cast<uint64_t>(step) * static_cast<uint64_t>(comm_.world_size()) +
                       static_cast<uint64_t>(comm_.rank())) *
                          65536 +
                      i) |
                         (uint64_t{1} << 63));
    model_.forward_backward(b, loss_scale, loss_sum);
    HR_CHECK(zero_.groups_in_flight() == 0,
             "every group gathered for a micro-batch was released after it");
  }
  zero_.finish_grads();

  PhaseScope scope(allocator, Phase::kOptimizer);
  float loss_host = 0;
  backend_.copy_to_host(loss_sum, &loss_host);
  loss_sum = Tensor();
  double loss_total[1] = {static_cast<double>(loss_host)};
  comm_.all_reduce_sum(loss_total);
  record.loss = global_counted[0] > 0 ? loss_total[0] / global_counted[0] : 0.0;
  const double norm =
      std::sqrt(zero_.grad_sum_of_squares(
          model_.options().tensor_parallel.group,
          [&](size_t g, size_t i) { return model_.splits_over_tensor_group(g, i); })) /
      scale;
  record.grad_norm = norm;
  record.lr = options_.schedule.at(step);

  overflowed_ = false;
  if (!std::isfinite(record.loss) || !std::isfinite(norm)) {
    record.skipped = true;
    ++skipped_;
    // GradScaler's update: an inf or NaN gradient under a dynamic scale
    // halves it; the forward's own non-finite loss is no overflow.
    overflowed_ = options_.dynamic_loss_scale && std::isfinite(record.loss);
    if (overflowed_) {
      scale_ = scale * 0.5;
      clean_steps_ = 0;
      log::info("step " + std::to_string(step) + ": gradient overflow at loss scale " +
                std::to_string(scale) + ": update skipped, scale halved");
    } else {
      log::warn("step " + std::to_string(step) + ": non-finite loss (" +
                std::to_string(record.loss) + ") or gradient norm (" + std::to_string(norm) +
                "): update skipped");
    }
  } else {
    const double clip = options_.grad_clip > 0 && norm > options_.grad_clip
                            ? options_.grad_clip / (norm + 1e-6)
                            : 1.0;
    std::vector<Tensor> grad_shards;
    for (size_t g = 0; g < zero_.num_groups(); ++g)
      grad_shards.push_back(zero_.grad_shard(g));
    // The scale is divided out inside the update, with the clip.
    optimizer_.step(grad_shards, static_cast<float>(record.lr), static_cast<float>(clip / scale),
                    ++updates_);
    // Each rank updated its own shards: at stages 1-2, put the groups back together.
    zero_.finish_step();
    if (options_.dynamic_loss_scale && ++clean_steps_ == options_.scale_growth_interval) {
      scale_ = scale * 2.0;
      clean_steps_ = 0;
    }
  }
  zero_.zero_grads();

  record.peak_allocated = allocator.peak_allocated();
  record.peak_reserved = allocator.peak_reserved();
  step_allocations_ = allocator.stats().num_allocs - allocations_at_start;
  record.step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  record.tokens_per_second = record.step_seconds > 0
                                 ? static_cast<double>(record.padded_tokens) / record.step_seconds
                                 : 0.0;
  return record;
}

}  // namespace headroom
