// What the decoder's tests share: a small model with every part (GQA,
// several attention tiles, an odd vocabulary), packed batches of awkward
// lengths, a cpu run with an exact allocator, and the mean loss of a batch.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "model/transformer.h"

namespace headroom::testing {

inline ModelConfig tiny_decoder(bool qk_norm, bool bias, bool tied) {
  ModelConfig c;
  c.name = "test";
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 23;
  c.hidden_size = 12;
  c.intermediate_size = 20;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;  // GQA ratio 2
  c.head_dim = 6;
  c.rope_theta = 10000;
  c.rms_norm_eps = 1e-6;
  c.qk_norm = qk_norm;
  c.attention_bias = bias;
  c.tie_word_embeddings = tied;
  return c;
}

// Three documents of awkward lengths (9, 14, 1) packed together.
inline Batch make_batch(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (int64_t len : {9, 14, 1}) {
    std::vector<int32_t> doc(static_cast<size_t>(len));
    for (auto& t : doc)
      t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    append_document(b, doc.data(), len);
  }
  return b;
}

struct CpuRun {
  Allocator allocator{make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0}};
  std::unique_ptr<Backend> backend = make_cpu_backend(allocator);
};

// The mean loss of `batch` (forward and backward run; gradients are zeroed).
inline double loss_of(Transformer& model, Backend& backend, const Batch& batch) {
  Tensor loss_sum = backend.empty({1}, DType::kF32, Category::kWorkspace, "loss");
  backend.fill(loss_sum, 0.0f);
  model.forward_backward(batch, 1.0f / static_cast<float>(batch.counted), loss_sum);
  model.zero_grads();
  float host = 0;
  backend.copy_to_host(loss_sum, &host);
  return host / static_cast<double>(batch.counted);
}

}  // namespace headroom::testing
