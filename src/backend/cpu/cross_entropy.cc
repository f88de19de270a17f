// cross_entropy: one chunk of logits against its targets.
//
// forward: lse[i] = log(sum_j exp(logits[i, j])), for every row (ignored ones
//   too: lse is defined by the logits alone); loss_sum += sum over rows with
//   a target in [0, V) of lse[i] - logits[i, target[i]].
//   Numerically stable: the row max is subtracted before exp; the exp-sum and
//   each row's loss are accumulated in double.
// backward, in place: logits[i, :] <- scale * (exp(logits[i, :] - lse[i]) -
//   onehot(target[i])); rows with target -1 become exactly 0, rows with
//   target -2 (counted, the target in another rank's part of the vocabulary)
//   scale * exp(logits[i, :] - lse[i]). It uses the lse
//   forward saved (no second max/exp-sum pass), so a chunk kept from forward
//   and a chunk recomputed by the same gemm give the same dlogits.
// logits fp32 or bf16 (bf16 is read exactly and its dlogits rounded once to
// nearest even); math in fp32, sums in double. exp is cpu/exp_approx.h's
// (~2 ulp; its argument clamped at -87, so a logit more than 87 below the
// row's max counts exp(-87) ~ 1.6e-38 instead of less, and -inf logits get
// that times scale as their gradient instead of 0), vectorized: libm's expf,
// one element at a time, made this op cost ~13 ns per logit.
// Row sums (max, exp-sum) run over eight lanes, element j in lane j % 8,
// combined in a fixed order at the end, in every clone alike.
// Determinism: rows are independent; loss_sum is a sum of kLossPartials
// partials over a partition of rows that depends only on N, each summed in
// row order, then summed in partial order, so its bits do not depend on the
// OpenMP thread count.
// Targets outside [-2, V) are an InternalError naming the row and value,
// raised before anything is written.
// Allocates: nothing.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_clones.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/exp_approx.h"
#include "backend/cross_entropy_checks.h"
#include "backend/op_checks.h"
#include "util/error.h"

namespace headroom {

namespace {

// Fixed, not per thread: enough to keep 256 threads busy, small enough for the
// stack (2 KiB), so loss_sum needs no scratch from the allocator.
constexpr int64_t kLossPartials = 256;

void check_target_values(std::string_view op, const Tensor& logits, const Tensor& targets) {
  const int32_t* target = targets.data<int32_t>();
  int64_t rows = targets.numel();
  int64_t vocab = logits.size(1);
  for (int64_t i = 0; i < rows; ++i)
    if (target[i] < -2 || target[i] >= vocab)
      throw InternalError(std::string(op) + ": targets " + describe_operand(targets) + " row " +
                          std::to_string(i) + " = " + std::to_string(target[i]) +
                          " is outside [-2, " + std::to_string(vocab) + ") for logits " +
                          describe_operand(logits) +
                          " (-1 marks a row that is not counted, -2 one whose target another "
                          "rank's part of the vocabulary holds)");
}

using cpu_simd::exp_approx;
using cpu_simd::select_less;

constexpr int kLanes = 8;

// The largest value of a row; a NaN is passed over (it makes the exp-sum NaN
// instead). select_less(m, v, v) is max(m, v) without a branch.
template <typename T>
HR_CPU_CLONES float row_max(const T* x, int64_t vocab) {
  float lanes[kLanes];
  for (float& m : lanes)
    m = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= vocab; j += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] = select_less(lanes[l], widen(x[j + l]), widen(x[j + l]));
  for (int l = 0; j + l < vocab; ++l)
    lanes[l] = select_less(lanes[l], widen(x[j + l]), widen(x[j + l]));
  float max = lanes[0];
  for (int l = 1; l < kLanes; ++l)
    max = select_less(max, lanes[l], lanes[l]);
  return max;
}

// sum_j exp(x[j] - max) of a row, in double.
template <typename T>
HR_CPU_CLONES double row_exp_sum(const T* x, int64_t vocab, float max) {
  double lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= vocab; j += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] += static_cast<double>(exp_approx(widen(x[j + l]) - max));
  for (int l = 0; j + l < vocab; ++l)
    lanes[l] += static_cast<double>(exp_approx(widen(x[j + l]) - max));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// log(sum_j exp(x[j])) of one row, in double.
template <typename T>
double row_logsumexp(const T* x, int64_t vocab) {
  const float max = row_max(x, vocab);
  // Every logit -inf: the sum is 0, exp(-inf - -inf) would be NaN.
  if (max == -std::numeric_limits<float>::infinity()) return max;
  return static_cast<double>(max) + std::log(row_exp_sum(x, vocab, max));
}

// x[j] <- scale * exp(x[j] - lse) for the row, in place.
template <typename T>
HR_CPU_CLONES void scaled_probabilities(T* x, int64_t vocab, float lse, float scale) {
#pragma omp simd
  for (int64_t j = 0; j < vocab; ++j)
    store(&x[j], scale * exp_approx(widen(x[j]) - lse));
}

template <typename T>
double forward_rows(const T* logits, const int32_t* target, float* lse, int64_t rows,
                    int64_t vocab) {
  std::array<double, kLossPartials> partials{};
  int64_t parts = std::min(kLossPartials, rows);
#pragma omp parallel for schedule(static) if (rows * vocab >= kMinParallelElements)
  for (int64_t p = 0; p < parts; ++p) {
    double partial = 0;
    for (int64_t i = rows * p / parts; i < rows * (p + 1) / parts; ++i) {
      const T* x = logits + i * vocab;
      double row_lse = row_logsumexp(x, vocab);
      lse[i] = static_cast<float>(row_lse);
      if (target[i] >= 0) partial += row_lse - static_cast<double>(widen(x[target[i]]));
    }
    partials[static_cast<size_t>(p)] = partial;
  }
  double total = 0;
  for (int64_t p = 0; p < parts; ++p)
    total += partials[static_cast<size_t>(p)];
  return total;
}

template <typename T>
void backward_rows(T* logits, const int32_t* target, const float* lse, int64_t rows, int64_t vocab,
                   float scale) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kMinParallelElements)
  for (int64_t i = 0; i < rows; ++i) {
    T* x = logits + i * vocab;
    int32_t t = target[i];
    if (t == -1) {
      for (int64_t j = 0; j < vocab; ++j)
        store(&x[j], 0.0f);
      continue;
    }
    float row_lse = lse[i];
    if (t < 0) {  // -2: the onehot is another rank's
      scaled_probabilities(x, vocab, row_lse, scale);
      continue;
    }
    // Read before the row is overwritten: the onehot term sits at x[t].
    float target_logit = widen(x[t]);
    scaled_probabilities(x, vocab, row_lse, scale);
    store(&x[t], scale * (exp_approx(target_logit - row_lse) - 1.0f));
  }
}

}  // namespace

void CpuKernels::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                       Tensor& loss_sum) {
  check_target_values("cross_entropy_forward", logits, targets);
  int64_t rows = logits.size(0);
  int64_t vocab = logits.size(1);
  const int32_t* target = targets.data<int32_t>();
  const double total = with_floating_type(logits.dtype(), [&]<typename T>(T*) {
    return forward_rows(logits.data<T>(), target, lse.data<float>(), rows, vocab);
  });
  float* sum = loss_sum.data<float>();
  sum[0] = static_cast<float>(static_cast<double>(sum[0]) + total);
}

void CpuKernels::cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                                        float scale) {
  check_target_values("cross_entropy_backward", logits, targets);
  int64_t rows = logits.size(0);
  int64_t vocab = logits.size(1);
  const int32_t* target = targets.data<int32_t>();
  with_floating_type(logits.dtype(), [&]<typename T>(T*) {
    backward_rows(logits.data<T>(), target, lse.data<float>(), rows, vocab, scale);
  });
}

}  // namespace headroom
