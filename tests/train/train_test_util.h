// What the decoder's tests share: a small model with every part (GQA,
// several attention tiles, an odd vocabulary), packed batches of awkward
// lengths, a cpu run with an exact allocator, and the mean loss of a batch.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
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

// The trainer and ZeRO suites' model: smaller than tiny_decoder (19 tokens,
// hidden 8, 2 heads sharing 1 kv head of 4), with qk_norm.
inline ModelConfig small_model(int64_t layers, bool tied) {
  ModelConfig c;
  c.name = "test";
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 19;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_layers = layers;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.qk_norm = true;
  c.tie_word_embeddings = tied;
  return c;
}

// The LoRA and QLoRA suites' adapters on `targets`: rank 3, alpha 6, seed 17
// (lora.seed and run.seed, which draws the dropout masks), attention tiles of
// 4 and loss chunks of 5.
inline TransformerOptions lora_test_options(std::vector<LoraTarget> targets, float dropout) {
  TransformerOptions o;
  o.attention_block_size = 4;
  o.loss.chunk_size = 5;
  o.lora.enabled = true;
  o.lora.rank = 3;
  o.lora.alpha = 6.0f;
  o.lora.dropout = dropout;
  o.lora.targets = std::move(targets);
  o.lora.seed = 17;
  o.step_seed = 17;
  return o;
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

// Every trainable group's gradient from one forward_backward against central
// differences of the mean loss, at `trials` random elements per group.
inline void expect_gradients_match_finite_differences(Transformer& model, Backend& backend,
                                                      const Batch& batch, int trials) {
  Tensor loss_sum = backend.empty({1}, DType::kF32, Category::kWorkspace, "loss");
  backend.fill(loss_sum, 0.0f);
  model.forward_backward(batch, 1.0f / static_cast<float>(batch.counted), loss_sum);
  std::vector<std::vector<float>> analytic(model.params().size());
  for (size_t g = 0; g < model.params().size(); ++g) {
    if (!model.layouts()[g].trainable) continue;
    const Tensor& flat = model.grads()[g].flat;
    analytic[g].assign(flat.data<float>(), flat.data<float>() + flat.numel());
  }
  model.zero_grads();

  std::mt19937_64 rng(11);
  for (size_t g = 0; g < model.params().size(); ++g) {
    if (!model.layouts()[g].trainable) continue;
    Tensor& flat = model.params()[g].flat;
    for (int trial = 0; trial < trials; ++trial) {
      const int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(flat.numel()));
      float* p = flat.data<float>() + i;
      const float saved = *p, h = 1e-3f;
      *p = saved + h;
      const double up = loss_of(model, backend, batch);
      *p = saved - h;
      const double down = loss_of(model, backend, batch);
      *p = saved;
      const double numeric = (up - down) / (2.0 * h);
      // fp32 forward: the loss (~3) carries ~1e-6 absolute error, so the
      // difference quotient is good to ~1e-4; curvature over h adds ~1e-4.
      EXPECT_NEAR(analytic[g][static_cast<size_t>(i)], numeric, 2e-3 + 0.03 * std::abs(numeric))
          << model.layouts()[g].name << " element " << i;
    }
  }
}

// What one forward_backward of `batch` allocates, from init on, on a fresh
// allocator of `policy`: every event and the tag names.
struct StepEvents {
  std::vector<MemoryEvent> events;
  std::vector<std::string> tags;
  const std::string& tag_of(const MemoryEvent& e) const { return tags[e.tag_id]; }
};

inline StepEvents record_step(BackendKind kind, const ModelConfig& config,
                              const TransformerOptions& options, const Batch& batch,
                              AllocatorPolicy policy = AllocatorPolicy::kCaching) {
  struct Recorder : MemoryObserver {
    std::vector<MemoryEvent> events;
    void on_memory_event(const MemoryEvent& e) override { events.push_back(e); }
  };
  const bool meta = kind == BackendKind::kMeta;
  Allocator allocator(meta ? make_virtual_source() : make_host_source(),
                      AllocatorOptions{policy, 0});
  Recorder rec;
  allocator.add_observer(&rec);
  {
    std::unique_ptr<Backend> backend =
        meta ? make_meta_backend(allocator) : make_cpu_backend(allocator);
    Transformer model(*backend, config, options);
    model.init_random(1);
    Tensor loss_sum = backend->empty({1}, DType::kF32, Category::kWorkspace, "loss");
    backend->fill(loss_sum, 0.0f);
    model.forward_backward(batch, 0.1f, loss_sum);
  }
  allocator.remove_observer(&rec);
  return {rec.events, allocator.tags()};
}

// Promise 1 at the model level: meta makes exactly cpu's allocations (action,
// bytes, tag, phase, layer, in order). Returns cpu's events.
inline StepEvents expect_meta_makes_the_cpu_allocations(const ModelConfig& config,
                                                        const TransformerOptions& options,
                                                        const Batch& batch) {
  StepEvents cpu = record_step(BackendKind::kCpu, config, options, batch);
  const StepEvents meta = record_step(BackendKind::kMeta, config, options, batch);
  EXPECT_EQ(cpu.events.size(), meta.events.size());
  for (size_t i = 0; i < std::min(cpu.events.size(), meta.events.size()); ++i) {
    const MemoryEvent &a = cpu.events[i], &b = meta.events[i];
    if (a.action != b.action || a.bytes != b.bytes || cpu.tag_of(a) != meta.tag_of(b) ||
        a.phase != b.phase || a.layer != b.layer) {
      ADD_FAILURE() << "event " << i << ": cpu " << cpu.tag_of(a) << " " << a.bytes << " B, meta "
                    << meta.tag_of(b) << " " << b.bytes << " B";
      break;
    }
  }
  return cpu;
}

}  // namespace headroom::testing
