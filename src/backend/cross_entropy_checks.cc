#include "backend/cross_entropy_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "backend/op_checks.h"

namespace headroom {

namespace {

void check_rows(std::string_view op, const Tensor& x, std::string_view x_role, int64_t rows,
                const Tensor& reference, std::string_view reference_role) {
  if (x.size(0) != rows)
    fail_op(op, describe_operand(x_role, x) + " must have " + std::to_string(rows) + " rows, as " +
                    describe_operand(reference_role, reference) + " has");
}

// The part both ops share: logits (N, V), targets (N) int32, lse (N) fp32.
void check_rows_and_targets(std::string_view op, BackendKind backend, const Tensor& logits,
                            const Tensor& targets, const Tensor& lse) {
  check_operand(op, backend, logits, "logits");
  check_operand(op, backend, targets, "targets");
  check_operand(op, backend, lse, "lse");
  check_rank(op, logits, "logits", 2, "(N, V)");
  check_floating(op, logits, "logits");
  // An empty vocabulary has no softmax; every target would be out of range.
  if (logits.size(1) == 0)
    fail_op(op, describe_operand("logits", logits) + " has no vocabulary columns");
  check_rank(op, targets, "targets", 1, "(N)");
  check_dtype(op, targets, "targets", DType::kI32);
  check_rank(op, lse, "lse", 1, "(N)");
  check_dtype(op, lse, "lse", DType::kF32);
  check_rows(op, targets, "targets", logits.size(0), logits, "logits");
  check_rows(op, lse, "lse", logits.size(0), logits, "logits");
}

void check_loss_sum(std::string_view op, BackendKind backend, const Tensor& loss_sum) {
  check_operand(op, backend, loss_sum, "loss_sum");
  if (loss_sum.dim() != 1 || loss_sum.size(0) != 1 || loss_sum.dtype() != DType::kF32)
    fail_op(op, describe_operand("loss_sum", loss_sum) + " must be fp32 [1]");
}

// 1 / counted tokens with nothing counted is inf; it would turn every
// gradient into NaN (0 * inf on ignored rows) far from its cause.
void check_scale(std::string_view op, float scale, const Tensor& output) {
  if (std::isfinite(scale)) return;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", static_cast<double>(scale));
  fail_op(op,
          std::string("scale ") + buffer + " is not finite (for " + describe_operand(output) + ")");
}

void check_linear_operands(std::string_view op, BackendKind backend, const Tensor& hidden,
                           const Tensor& weight, const Tensor& targets,
                           const LinearCrossEntropyOptions& options) {
  check_operand(op, backend, hidden, "hidden");
  check_operand(op, backend, weight, "weight");
  check_operand(op, backend, targets, "targets");
  check_rank(op, hidden, "hidden", 2, "(T, C)");
  check_rank(op, weight, "weight", 2, "(V, C)");
  check_floating(op, hidden, "hidden");
  if (weight.dtype() != hidden.dtype())
    fail_op(op, "dtype mismatch: " + describe_operand("hidden", hidden) + " vs " +
                    describe_operand("weight", weight));
  if (weight.size(1) != hidden.size(1))
    fail_op(op, "hidden size differs: " + describe_operand("hidden", hidden) + " has C = " +
                    std::to_string(hidden.size(1)) + ", " + describe_operand("weight", weight) +
                    " has C = " + std::to_string(weight.size(1)));
  if (weight.size(0) == 0)
    fail_op(op, describe_operand("weight", weight) + " has no vocabulary rows");
  check_rank(op, targets, "targets", 1, "(T)");
  check_dtype(op, targets, "targets", DType::kI32);
  check_rows(op, targets, "targets", hidden.size(0), hidden, "hidden");
  if (options.chunk_size < 0)
    fail_op(op,
            "chunk_size " + std::to_string(options.chunk_size) + " is negative (0 = one chunk)");
  if (options.logits_dtype != DType::kF32 && options.logits_dtype != hidden.dtype())
    fail_op(op, "logits dtype " + std::string(name_of(options.logits_dtype)) +
                    " must be fp32 or the dtype of " + describe_operand("hidden", hidden));
}

}  // namespace

void check_cross_entropy_forward(BackendKind backend, const Tensor& logits, const Tensor& targets,
                                 const Tensor& lse, const Tensor& loss_sum) {
  constexpr std::string_view op = "cross_entropy_forward";
  check_rows_and_targets(op, backend, logits, targets, lse);
  check_loss_sum(op, backend, loss_sum);
  check_disjoint(op, lse, "lse", logits, "logits");
  check_disjoint(op, lse, "lse", targets, "targets");
  check_disjoint(op, loss_sum, "loss_sum", logits, "logits");
  check_disjoint(op, loss_sum, "loss_sum", targets, "targets");
  check_disjoint(op, loss_sum, "loss_sum", lse, "lse");
}

void check_cross_entropy_backward(BackendKind backend, const Tensor& logits, const Tensor& targets,
                                  const Tensor& lse, float scale) {
  constexpr std::string_view op = "cross_entropy_backward";
  check_rows_and_targets(op, backend, logits, targets, lse);
  check_disjoint(op, logits, "logits", targets, "targets");
  check_disjoint(op, logits, "logits", lse, "lse");
  check_scale(op, scale, logits);
}

void check_linear_cross_entropy_forward(BackendKind backend, const Tensor& hidden,
                                        const Tensor& weight, const Tensor& targets,
                                        const LinearCrossEntropyOptions& options,
                                        const Tensor& loss_sum) {
  constexpr std::string_view op = "linear_cross_entropy_forward";
  check_linear_operands(op, backend, hidden, weight, targets, options);
  check_loss_sum(op, backend, loss_sum);
  check_disjoint(op, loss_sum, "loss_sum", hidden, "hidden");
  check_disjoint(op, loss_sum, "loss_sum", weight, "weight");
  check_disjoint(op, loss_sum, "loss_sum", targets, "targets");
}

void check_linear_cross_entropy_backward(BackendKind backend, const Tensor& hidden,
                                         const Tensor& weight, const Tensor& targets,
                                         const LinearCrossEntropySaved& saved,
                                         const LinearCrossEntropyOptions& options, float scale,
                                         const Tensor& d_hidden, const Tensor& d_weight) {
  constexpr std::string_view op = "linear_cross_entropy_backward";
  check_linear_operands(op, backend, hidden, weight, targets, options);
  check_operand(op, backend, d_hidden, "d_hidden");
  // An undefined d_weight is a frozen lm_head: d_hidden is still needed.
  const bool has_d_weight = d_weight.defined();
  if (has_d_weight) check_operand(op, backend, d_weight, "d_weight");
  if (d_hidden.shape() != hidden.shape())
    fail_op(op, "shape mismatch: " + describe_operand("d_hidden", d_hidden) + " vs " +
                    describe_operand("hidden", hidden));
  if (has_d_weight && d_weight.shape() != weight.shape())
    fail_op(op, "shape mismatch: " + describe_operand("d_weight", d_weight) + " vs " +
                    describe_operand("weight", weight));
  if (d_hidden.dtype() != hidden.dtype() && d_hidden.dtype() != DType::kF32)
    fail_op(op, describe_operand("d_hidden", d_hidden) + " must be fp32 or the dtype of " +
                    describe_operand("hidden", hidden));
  if (has_d_weight && d_weight.dtype() != weight.dtype() && d_weight.dtype() != DType::kF32)
    fail_op(op, describe_operand("d_weight", d_weight) + " must be fp32 or the dtype of " +
                    describe_operand("weight", weight));
  check_disjoint(op, d_hidden, "d_hidden", hidden, "hidden");
  check_disjoint(op, d_hidden, "d_hidden", weight, "weight");
  if (has_d_weight) {
    check_disjoint(op, d_weight, "d_weight", hidden, "hidden");
    check_disjoint(op, d_weight, "d_weight", weight, "weight");
    check_disjoint(op, d_hidden, "d_hidden", d_weight, "d_weight");
  }
  check_scale(op, scale, has_d_weight ? d_weight : d_hidden);

  int64_t tokens = hidden.size(0);
  int64_t vocab = weight.size(0);
  check_operand(op, backend, saved.lse, "saved lse");
  if (saved.lse.shape() != Shape{tokens} || saved.lse.dtype() != DType::kF32)
    fail_op(op, describe_operand("saved lse", saved.lse) + " is not fp32 [" +
                    std::to_string(tokens) + "] for " + describe_operand("hidden", hidden) +
                    " (was forward run on these tokens?)");
  int64_t chunks = linear_cross_entropy_num_chunks(tokens, options.chunk_size);
  int64_t expected = options.save_softmax ? chunks : 0;
  if (static_cast<int64_t>(saved.chunks.size()) != expected)
    fail_op(op, "saved holds " + std::to_string(saved.chunks.size()) + " logits chunks, mode " +
                    (options.save_softmax ? "save" : "recompute") + " with chunk_size " +
                    std::to_string(options.chunk_size) + " over " + std::to_string(tokens) +
                    " tokens expects " + std::to_string(expected) +
                    " (forward and backward must use the same options; backward runs once)");
  int64_t rows = linear_cross_entropy_chunk_rows(tokens, options.chunk_size);
  for (int64_t i = 0; i < expected; ++i) {
    const Tensor& chunk = saved.chunks[static_cast<size_t>(i)];
    std::string role = "saved chunk " + std::to_string(i);
    check_operand(op, backend, chunk, role);
    Shape shape = {std::min(rows, tokens - i * rows), vocab};
    if (chunk.shape() != shape || chunk.dtype() != options.logits_dtype)
      fail_op(op, describe_operand(role, chunk) + " is not " +
                      std::string(name_of(options.logits_dtype)) + " " + shape_to_string(shape));
  }
}

}  // namespace headroom
