#include "backend/linear_cross_entropy.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "backend/cross_entropy_checks.h"

namespace headroom {

namespace {

std::string chunk_tag(int64_t chunk, std::string_view what) {
  return "loss.chunk." + std::to_string(chunk) + "." + std::string(what);
}

// logits[chunk] = hidden[chunk] @ weight^T, into a new (Tc, V) buffer.
Tensor chunk_logits(Backend& backend, const Tensor& hidden_rows, const Tensor& weight,
                    DType logits_dtype, int64_t chunk) {
  Tensor logits = backend.empty({hidden_rows.size(0), weight.size(0)}, logits_dtype,
                                Category::kLogits, chunk_tag(chunk, "logits"));
  backend.gemm(hidden_rows, false, weight, true, logits, 1.0f, 0.0f);
  return logits;
}

}  // namespace

int64_t linear_cross_entropy_chunk_rows(int64_t tokens, int64_t chunk_size) {
  return chunk_size == 0 ? tokens : std::min(chunk_size, tokens);
}

int64_t linear_cross_entropy_num_chunks(int64_t tokens, int64_t chunk_size) {
  if (tokens == 0) return 0;
  int64_t rows = linear_cross_entropy_chunk_rows(tokens, chunk_size);
  return (tokens + rows - 1) / rows;
}

LinearCrossEntropySaved linear_cross_entropy_forward(Backend& backend, const Tensor& hidden,
                                                     const Tensor& weight, const Tensor& targets,
                                                     const LinearCrossEntropyOptions& options,
                                                     Tensor& loss_sum) {
  check_linear_cross_entropy_forward(backend.kind(), hidden, weight, targets, options, loss_sum);
  int64_t tokens = hidden.size(0);
  int64_t rows = linear_cross_entropy_chunk_rows(tokens, options.chunk_size);
  int64_t chunks = linear_cross_entropy_num_chunks(tokens, options.chunk_size);

  LinearCrossEntropySaved saved;
  saved.lse = backend.empty({tokens}, DType::kF32, Category::kActivation, "loss.lse");
  // Every chunk reads the whole weight (V, C): widened once where gemms widen,
  // not once per chunk. Its copy adds nothing to the peak, which is a
  // chunk's gemm, where the copy was held anyway.
  const SharedGemmOperand shared_weight = backend.share_gemm_operand(weight);
  for (int64_t i = 0; i < chunks; ++i) {
    int64_t begin = i * rows;
    int64_t end = std::min(begin + rows, tokens);
    Tensor logits = chunk_logits(backend, hidden.rows(begin, end), weight, options.logits_dtype, i);
    Tensor lse_rows = saved.lse.rows(begin, end);
    backend.cross_entropy_forward(logits, targets.rows(begin, end), lse_rows, loss_sum);
    // Save mode keeps the chunk until backward: this is where the retained
    // bytes add up to T x V whatever the chunk size. Recompute frees it here,
    // before the next chunk is allocated.
    if (options.save_softmax) saved.chunks.push_back(std::move(logits));
  }
  return saved;
}

void linear_cross_entropy_backward(Backend& backend, const Tensor& hidden, const Tensor& weight,
                                   const Tensor& targets, LinearCrossEntropySaved& saved,
                                   const LinearCrossEntropyOptions& options, float scale,
                                   Tensor& d_hidden, Tensor& d_weight) {
  check_linear_cross_entropy_backward(backend.kind(), hidden, weight, targets, saved, options,
                                      scale, d_hidden, d_weight);
  int64_t tokens = hidden.size(0);
  int64_t rows = linear_cross_entropy_chunk_rows(tokens, options.chunk_size);
  int64_t chunks = linear_cross_entropy_num_chunks(tokens, options.chunk_size);

  for (int64_t i = 0; i < chunks; ++i) {
    int64_t begin = i * rows;
    int64_t end = std::min(begin + rows, tokens);
    Tensor hidden_rows = hidden.rows(begin, end);
    // The weight is read by the recomputed logits and by d_hidden's gemm,
    // widened once for both where gemms widen. Shared per chunk, not across
    // the loop, so that its copy is gone before d_weight's gemm (whose own
    // copy of d_weight is as large) instead of adding to it.
    std::optional<SharedGemmOperand> shared_weight(backend.share_gemm_operand(weight));
    // Taking the kept chunk out of `saved` makes this loop its last owner, so
    // it is freed at the end of the iteration, not at the end of backward.
    Tensor logits = options.save_softmax
                        ? std::move(saved.chunks[static_cast<size_t>(i)])
                        : chunk_logits(backend, hidden_rows, weight, options.logits_dtype, i);
    backend.cross_entropy_backward(logits, targets.rows(begin, end), saved.lse.rows(begin, end),
                                   scale);
    // gemm multiplies operands of one dtype: upcast dlogits go back to the
    // weight's dtype (the fp32 chunk is freed as soon as the copy exists).
    if (logits.dtype() != weight.dtype())
      logits = backend.cast(logits, weight.dtype(), Category::kLogits, chunk_tag(i, "dlogits"));
    Tensor d_hidden_rows = d_hidden.rows(begin, end);
    // dlogits are read by both gemms: widened once where gemms widen.
    const SharedGemmOperand shared_dlogits = backend.share_gemm_operand(logits);
    backend.gemm(logits, false, weight, false, d_hidden_rows, 1.0f, 0.0f);
    shared_weight.reset();
    if (d_weight.defined()) backend.gemm(logits, true, hidden_rows, false, d_weight, 1.0f, 1.0f);
  }
  saved.chunks.clear();
  saved.lse = Tensor();
}

}  // namespace headroom
