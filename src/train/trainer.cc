#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/log.h"

namespace headroom {

Trainer::Trainer(Backend& backend, Transformer& model, AdamW& optimizer,
                 const TrainerOptions& options, Communicator* comm)
    : backend_(backend),
      model_(model),
      optimizer_(optimizer),
      options_(options),
      single_(comm ? nullptr : make_single_rank_comm()),
      comm_(comm ? *comm : *single_) {}

StepRecord Trainer::step(int64_t step, const std::vector<Batch>& micro_batches) {
  Allocator& allocator = backend_.allocator();
  const auto t0 = std::chrono::steady_clock::now();
  allocator.set_step(step);
  allocator.reset_peaks();

  StepRecord record;
  record.step = step;
  int64_t counted = 0;
  for (const Batch& b : micro_batches) {
    counted += b.counted;
    record.tokens += b.counted;
    record.padded_tokens += b.size();
    record.longest_sample = std::max(record.longest_sample, b.longest);
    record.truncated_samples += b.truncated;
  }
  record.micro_batches = static_cast<int64_t>(micro_batches.size());

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
  const float loss_scale =
      global_counted[0] > 0 ? static_cast<float>(1.0 / global_counted[0]) : 0.0f;
  for (const Batch& b : micro_batches)
    model_.forward_backward(b, loss_scale, loss_sum);
  if (comm_.world_size() > 1) {
    PhaseScope reduce(allocator, Phase::kReduce);
    for (size_t g = 0; g < model_.grads().size(); ++g)
      comm_.all_reduce_sum(backend_, model_.grads()[g].flat, model_.layouts()[g].name + ".grad");
  }

  PhaseScope scope(allocator, Phase::kOptimizer);
  float loss_host = 0;
  backend_.copy_to_host(loss_sum, &loss_host);
  loss_sum = Tensor();
  double loss_total[1] = {static_cast<double>(loss_host)};
  comm_.all_reduce_sum(loss_total);
  record.loss = global_counted[0] > 0 ? loss_total[0] / global_counted[0] : 0.0;
  const double norm = std::sqrt(grad_sum_of_squares(backend_, model_.grads()));
  record.grad_norm = norm;
  record.lr = options_.schedule.at(step);

  if (!std::isfinite(record.loss) || !std::isfinite(norm)) {
    record.skipped = true;
    ++skipped_;
    log::warn("step " + std::to_string(step) + ": non-finite loss (" + std::to_string(record.loss) +
              ") or gradient norm (" + std::to_string(norm) + "): update skipped");
  } else {
    const float clip = options_.grad_clip > 0 && norm > options_.grad_clip
                           ? static_cast<float>(options_.grad_clip / (norm + 1e-6))
                           : 1.0f;
    optimizer_.step(model_.grads(), static_cast<float>(record.lr), clip, ++updates_);
    if (options_.zero_stage >= 1 && comm_.world_size() > 1) {
      // Each rank updated its own shard: put the groups back together.
      PhaseScope gather(allocator, Phase::kGather);
      std::vector<int64_t> counts(static_cast<size_t>(comm_.world_size()));
      for (size_t g = 0; g < model_.params().size(); ++g) {
        for (int r = 0; r < comm_.world_size(); ++r)
          counts[static_cast<size_t>(r)] =
              GroupShard::of(model_.layouts()[g].numel, r, comm_.world_size()).numel();
        comm_.all_gather_in_place(model_.params()[g].flat, counts);
      }
    }
  }
  model_.zero_grads();

  record.peak_allocated = allocator.peak_allocated();
  record.peak_reserved = allocator.peak_reserved();
  record.step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  record.tokens_per_second = record.step_seconds > 0
                                 ? static_cast<double>(record.padded_tokens) / record.step_seconds
                                 : 0.0;
  return record;
}

}  // namespace headroom
