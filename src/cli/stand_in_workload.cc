#include "stand_in_workload.h"

#include <string>

namespace headroom {

namespace {
std::string block_tag(int64_t layer, const char* what) {
  return "block." + std::to_string(layer) + "." + what;
}
}  // namespace

StandInWorkload::StandInWorkload(Backend& backend, const StandInShape& shape, uint64_t seed)
    : backend_(backend), shape_(shape), seed_(seed) {
  PhaseScope scope(backend.allocator(), Phase::kInit);
  const int64_t C = shape.width;
  for (int64_t l = 0; l <= shape.layers; ++l) {
    const bool head = l == shape.layers;
    Shape w_shape = head ? Shape{shape.vocab, C} : Shape{C, C};  // (V, C) or (C, C)
    std::string name = head ? std::string("head.w") : block_tag(l, "w");
    Tensor w = backend.empty(w_shape, shape.dtype, Category::kParam, name);
    backend.fill_uniform(w, seed + static_cast<uint64_t>(l), -0.05f, 0.05f);
    weights_.push_back(w);
    Tensor g = backend.empty(w_shape, DType::kF32, Category::kGrad, name + ".grad");
    backend.fill(g, 0.0f);
    grads_.push_back(g);
    Tensor m = backend.empty(w_shape, DType::kF32, Category::kOptim, name + ".adam_m");
    backend.fill(m, 0.0f);
    adam_m_.push_back(m);
    Tensor v = backend.empty(w_shape, DType::kF32, Category::kOptim, name + ".adam_v");
    backend.fill(v, 0.0f);
    adam_v_.push_back(v);
  }
}

int64_t StandInWorkload::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& w : weights_)
    n += w.numel();
  return n;
}

void StandInWorkload::step(int64_t step) {
  Allocator& allocator = backend_.allocator();
  const int64_t T = shape_.tokens, C = shape_.width, L = shape_.layers;
  std::vector<Tensor> saved;  // saved[l]: input of layer l, (T, C)

  {
    PhaseScope scope(allocator, Phase::kForward);
    Tensor x = backend_.empty({T, C}, shape_.dtype, Category::kActivation, "embed.out");
    backend_.fill_uniform(x, seed_ * 7919 + static_cast<uint64_t>(step), -1.0f, 1.0f);
    for (int64_t l = 0; l < L; ++l) {
      PhaseScope layer(allocator, Phase::kForward, static_cast<int32_t>(l));
      saved.push_back(x);
      Tensor y = backend_.empty({T, C}, shape_.dtype, Category::kActivation, block_tag(l, "out"));
      backend_.gemm(x, false, weights_[l], true, y, 1.0f, 0.0f);  // (T, C) = (T, C) @ (C, C)^T
      x = y;
    }
    saved.push_back(x);
  }

  Tensor d;  // gradient flowing back, (T, C)
  {
    PhaseScope scope(allocator, Phase::kLoss);
    Tensor logits =
        backend_.empty({T, shape_.vocab}, shape_.dtype, Category::kLogits, "loss.logits");
    backend_.gemm(saved[L], false, weights_[L], true, logits, 1.0f, 0.0f);  // (T, V)
    // The stand-in loss gradient is the logits themselves.
    backend_.gemm(logits, true, saved[L], false, grads_[L], 1.0f / static_cast<float>(T),
                  1.0f);  // (V, C) += (T, V)^T @ (T, C)
    d = backend_.empty({T, C}, shape_.dtype, Category::kActivation, "head.dx");
    backend_.gemm(logits, false, weights_[L], false, d, 1.0f / static_cast<float>(T),
                  0.0f);  // (T, C) = (T, V) @ (V, C)
  }                       // logits freed here, as a fused loss would

  {
    PhaseScope scope(allocator, Phase::kBackward);
    saved.pop_back();
    for (int64_t l = L - 1; l >= 0; --l) {
      PhaseScope layer(allocator, Phase::kBackward, static_cast<int32_t>(l));
      backend_.gemm(d, true, saved[l], false, grads_[l], 1.0f, 1.0f);  // (C, C) += d^T @ x
      Tensor dx = backend_.empty({T, C}, shape_.dtype, Category::kActivation, block_tag(l, "dx"));
      backend_.gemm(d, false, weights_[l], false, dx, 1.0f, 0.0f);  // (T, C) = d @ W
      saved.pop_back();  // the saved input is no longer needed
      d = dx;
    }
    d = Tensor();
  }

  {
    PhaseScope scope(allocator, Phase::kOptimizer);
    // Not Adam: the stand-in only touches the states the way an update does.
    for (size_t i = 0; i < grads_.size(); ++i) {
      backend_.add(adam_m_[i], grads_[i], adam_m_[i]);
      backend_.fill(grads_[i], 0.0f);
    }
  }
}

}  // namespace headroom
