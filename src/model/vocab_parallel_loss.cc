#include "model/vocab_parallel_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "comm/communicator.h"
#include "util/error.h"

namespace headroom {

VocabParallelSaved vocab_parallel_cross_entropy_forward(Backend& backend, const Tensor& hidden,
                                                        const Tensor& weight,
                                                        const std::vector<int32_t>& targets,
                                                        const TensorParallel& tp,
                                                        const LinearCrossEntropyOptions& options,
                                                        Tensor& loss_sum) {
  const int64_t T = hidden.size(0), part = weight.size(0);
  const int64_t begin = tp.rank * part;
  HR_CHECK(tp.enabled() && static_cast<int64_t>(targets.size()) == T,
           "vocab-parallel cross-entropy: a tensor-parallel group and one target per row");
  // Forward counts only the targets this part holds (the rest -1); the
  // backward's -2 marks a counted row whose onehot another part holds.
  std::vector<int32_t> mine(targets.size()), for_backward(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const int32_t t = targets[i];
    const bool here = t >= begin && t < begin + part;
    mine[i] = here ? static_cast<int32_t>(t - begin) : -1;
    for_backward[i] = t < 0 ? -1 : here ? mine[i] : -2;
  }
  VocabParallelSaved saved;
  saved.targets = backend.empty({T}, DType::kI32, Category::kActivation, "loss.targets.part");
  backend.copy_from_host(mine.data(), saved.targets);

  Tensor part_sum = backend.empty({1}, DType::kF32, Category::kWorkspace, "loss.part_sum");
  backend.fill(part_sum, 0.0f);
  saved.loss =
      linear_cross_entropy_forward(backend, hidden, weight, saved.targets, options, part_sum);

  // Every part's lse of every row, then the whole vocabulary's.
  const int n = tp.size;
  Tensor parts = backend.empty({n * T}, DType::kF32, Category::kActivation, "loss.lse.parts");
  Tensor own = parts.rows(tp.rank * T, (tp.rank + 1) * T);
  backend.copy(saved.loss.lse, own);
  const std::vector<int64_t> counts(static_cast<size_t>(n), T);
  tp.group->all_gather_in_place(parts, counts);
  tp.group->all_reduce_sum(backend, part_sum, "loss.part_sum");
  if (backend.kind() != BackendKind::kMeta) {
    std::vector<float> lse_parts(static_cast<size_t>(n * T)), lse(static_cast<size_t>(T));
    backend.copy_to_host(parts, lse_parts.data());
    double rest = 0;  // sum over counted rows of lse - lse of the part holding the target
    for (int64_t i = 0; i < T; ++i) {
      double max = -std::numeric_limits<double>::infinity();
      for (int r = 0; r < n; ++r)
        max = std::max(max, static_cast<double>(lse_parts[static_cast<size_t>(r * T + i)]));
      double sum = 0;
      for (int r = 0; r < n; ++r)
        sum += std::exp(static_cast<double>(lse_parts[static_cast<size_t>(r * T + i)]) - max);
      const double row_lse = max + std::log(sum);
      lse[static_cast<size_t>(i)] = static_cast<float>(row_lse);
      const int32_t t = targets[static_cast<size_t>(i)];
      if (t >= 0) rest += row_lse - lse_parts[static_cast<size_t>((t / part) * T + i)];
    }
    backend.copy_from_host(lse.data(), saved.loss.lse);
    float sum = 0;
    backend.copy_to_host(part_sum, &sum);
    sum = static_cast<float>(static_cast<double>(sum) + rest);
    backend.copy_from_host(&sum, part_sum);
  }
  backend.add(loss_sum, part_sum, loss_sum);
  backend.copy_from_host(for_backward.data(), saved.targets);
  return saved;
}

void vocab_parallel_cross_entropy_backward(Backend& backend, const Tensor& hidden,
                                           const Tensor& weight, VocabParallelSaved& saved,
                                           const LinearCrossEntropyOptions& options, float scale,
                                           Tensor& d_hidden, Tensor& d_weight) {
  linear_cross_entropy_backward(backend, hidden, weight, saved.targets, saved.loss, options, scale,
                                d_hidden, d_weight);
  saved.targets = Tensor();
}

}  // namespace headroom
