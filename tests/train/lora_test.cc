// LoRA on the decoder: an adapted model starts as exactly its base, the
// adapters' gradients match finite differences (dropout included), the
// frozen base has no gradient or optimizer byte, and meta makes exactly the
// cpu's allocations, the adapters' saved activations under their own tags.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include <filesystem>

#include "model/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "test_util/temp_dir.h"
#include "train/optimizer.h"
#include "train_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::CpuRun;
using testing::loss_of;
using testing::make_batch;

ModelConfig tiny(bool tied) {
  return testing::tiny_decoder(true, false, tied);
}

const std::vector<LoraTarget> kAllTargets = {kLoraQ,    kLoraK,  kLoraV,   kLoraO,
                                             kLoraGate, kLoraUp, kLoraDown};

TransformerOptions lora_options(std::vector<LoraTarget> targets, float dropout) {
  return testing::lora_test_options(std::move(targets), dropout);
}

// B starts at zero, so at step 0 every adapter adds exactly nothing.
TEST(Lora, AnAdaptedModelStartsAsExactlyItsBase) {
  for (bool tied : {false, true}) {
    for (float dropout : {0.0f, 0.25f}) {
      CpuRun a, b;
      TransformerOptions plain;
      plain.attention_block_size = 4;
      plain.loss.chunk_size = 5;
      Transformer base(*a.backend, tiny(tied), plain);
      TransformerOptions options = lora_options(kAllTargets, dropout);
      options.lora.gaussian_init = tied;  // PEFT's "gaussian": A ~ N(0, 1/r)
      Transformer adapted(*b.backend, tiny(tied), options);
      base.init_random(7);
      adapted.init_random(7);
      // A drawn as configured, B zero.
      const Tensor& a_q = adapted.params()[adapted.num_base_groups()].views[0];  // (3, 12)
      double sum_sq = 0, largest = 0;
      for (int64_t i = 0; i < a_q.numel(); ++i) {
        sum_sq += a_q.data<float>()[i] * a_q.data<float>()[i];
        largest = std::max(largest, std::abs(static_cast<double>(a_q.data<float>()[i])));
      }
      if (tied)
        EXPECT_NEAR(std::sqrt(sum_sq / 36), 1.0 / 3, 0.15) << "std 1/r";
      else
        EXPECT_LE(largest, 1.0 / std::sqrt(12.0)) << "U(-1/sqrt(in), 1/sqrt(in))";
      const Tensor& b_q = adapted.params()[adapted.num_base_groups()].views[1];
      for (int64_t i = 0; i < b_q.numel(); ++i)
        ASSERT_EQ(b_q.data<float>()[i], 0.0f);
      const Batch batch = make_batch(23, 3);
      EXPECT_EQ(loss_of(adapted, *b.backend, batch), loss_of(base, *a.backend, batch))
          << "tied " << tied << " dropout " << dropout;
    }
  }
}

class LoraGradients
    : public ::testing::TestWithParam<std::tuple<bool, float, int, std::vector<LoraTarget>>> {};

// Only the adapters are trained: their gradients against central differences
// of the loss, with nonzero B (as after some steps) and weights larger than
// the init so every path carries signal. The dropout masks depend only on
// the seed, the layer and the stream, so the loss is a fixed function.
TEST_P(LoraGradients, MatchFiniteDifferences) {
  auto [tied, dropout, interval, targets] = GetParam();
  CpuRun run;
  TransformerOptions options = lora_options(targets, dropout);
  options.checkpoint_interval = interval;
  Transformer model(*run.backend, tiny(tied), options);
  model.init_random(7);
  model.set_random_stream(5);
  std::mt19937_64 init(3);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  for (size_t g = 0; g < model.params().size(); ++g) {
    Tensor& flat = model.params()[g].flat;
    for (int64_t i = 0; i < flat.numel(); ++i)
      flat.data<float>()[i] =
          g < model.num_base_groups() ? flat.data<float>()[i] * 3.0f : uniform(init);
  }
  const Batch batch = make_batch(23, 3);
  for (size_t g = 0; g < model.num_base_groups(); ++g)
    EXPECT_FALSE(model.grads()[g].flat.defined()) << "the frozen base has no gradient buffer";

  testing::expect_gradients_match_finite_differences(model, *run.backend, batch, 16);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LoraGradients,
    ::testing::Values(std::make_tuple(false, 0.0f, 0, kAllTargets),
                      std::make_tuple(true, 0.0f, 1, std::vector<LoraTarget>{kLoraQ, kLoraV}),
                      std::make_tuple(false, 0.3f, 0, kAllTargets),
                      std::make_tuple(true, 0.3f, 1, kAllTargets),
                      std::make_tuple(false, 0.0f, 1, std::vector<LoraTarget>{kLoraO, kLoraDown})));

// Gradients and optimizer states exist for the adapters alone: in bf16, 2
// bytes of gradient and 12 of optimizer state (master, m, v) per adapter
// parameter, and the base's parameters stay as they were.
TEST(Lora, OnlyAdapterBytesAreGradientsAndOptimizerStates) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    Allocator allocator(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
    std::unique_ptr<Backend> backend = make_meta_backend(allocator);
    TransformerOptions options = lora_options(kAllTargets, 0.1f);
    options.dtype = dtype;
    Transformer model(*backend, tiny(false), options);
    model.init_random(1);
    AdamW optimizer(*backend, model.layouts(), model.params(), AdamWConfig{});
    int64_t base = 0, adapters = 0;
    for (const GroupLayout& layout : model.layouts())
      (layout.trainable ? adapters : base) += layout.numel;
    const int64_t r = 3, C = 12, F = 20, HD = 24, KVD = 12;
    EXPECT_EQ(adapters,
              2 * (r * (C + HD) + 2 * r * (C + KVD) + r * (HD + C) + 2 * r * (C + F) + r * (F + C)))
        << "A (r, in) and B (out, r) for all seven projections of both blocks";
    const uint64_t width = size_of(dtype);
    const auto& live = allocator.stats().live_by_category;
    EXPECT_EQ(live[static_cast<int>(Category::kParam)],
              static_cast<uint64_t>(base + adapters) * width);
    EXPECT_EQ(live[static_cast<int>(Category::kGrad)], static_cast<uint64_t>(adapters) * width);
    EXPECT_EQ(live[static_cast<int>(Category::kOptim)],
              static_cast<uint64_t>(adapters) * (dtype == DType::kBF16 ? 12 : 8));
  }
}

TEST(Lora, MetaMakesExactlyTheCpuAllocationsWithAdaptersUnderTheirOwnTags) {
  for (int interval : {0, 1}) {
    TransformerOptions o = lora_options(kAllTargets, 0.2f);
    o.dtype = DType::kBF16;
    o.checkpoint_interval = interval;
    const testing::StepEvents cpu =
        testing::expect_meta_makes_the_cpu_allocations(tiny(true), o, make_batch(23, 4));
    int xa = 0, dropped = 0;
    for (const MemoryEvent& e : cpu.events) {
      if (e.action != MemoryAction::kAlloc) continue;
      const std::string& tag = cpu.tag_of(e);
      xa += tag == "block.1.attn.q.lora.xa";
      dropped += tag == "block.1.mlp.down.lora.x_dropped";
      EXPECT_FALSE(e.category == Category::kGrad && tag.rfind("lora.", 0) != 0)
          << tag << ": only adapters have gradients";
    }
    EXPECT_EQ(xa, interval ? 2 : 1) << "x A^T, saved for dB (again when recomputed)";
    EXPECT_EQ(dropped, interval ? 2 : 1) << "the dropped-out input, saved for dA";
  }
}

// Trained-looking adapters: B random instead of zero.
void randomize_adapters(Transformer& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.3f, 0.3f);
  for (size_t g = model.num_base_groups(); g < model.params().size(); ++g) {
    Tensor& flat = model.params()[g].flat;
    for (int64_t i = 0; i < flat.numel(); ++i)
      flat.data<float>()[i] = uniform(rng);
  }
}

// PEFT's layout both ways: what save_adapter writes, load_adapter reads back
// bit for bit; the names are PEFT's and the base's tensors are not in it.
TEST(Lora, AdaptersSavedInPeftsLayoutLoadBackExactly) {
  testing::TempDir scratch;
  CpuRun a, b;
  const TransformerOptions options = lora_options(kAllTargets, 0.0f);
  Transformer trained(*a.backend, tiny(false), options), fresh(*b.backend, tiny(false), options);
  trained.init_random(7);
  randomize_adapters(trained, 5);
  fresh.init_random(7);
  save_adapter(*a.backend, trained, scratch.path(), "base.safetensors");
  load_adapter(*b.backend, fresh, scratch.path());
  for (size_t g = 0; g < trained.params().size(); ++g) {
    const Tensor& x = trained.params()[g].flat;
    const Tensor& y = fresh.params()[g].flat;
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(x.data<float>()[i], y.data<float>()[i]) << trained.layouts()[g].name << " " << i;
  }
  const SafetensorsIndex index = SafetensorsIndex::open(scratch.file("adapter_model.safetensors"));
  EXPECT_EQ(index.entries().size(), 2u * 7u * 2u) << "A and B of 7 targets in 2 layers";
  const SafetensorsEntry& q_a =
      index.at("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(q_a.shape, (Shape{3, 12}));
  const SafetensorsEntry& down_b =
      index.at("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
  EXPECT_EQ(down_b.shape, (Shape{12, 3}));

  // An adapter of another rank is refused, naming the file and the key.
  TransformerOptions other = options;
  other.lora.rank = 4;
  CpuRun c;
  Transformer wrong(*c.backend, tiny(false), other);
  try {
    load_adapter(*c.backend, wrong, scratch.path());
    FAIL() << "rank 3 adapters loaded into a rank 4 model";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("adapter_config.json: r is 3"), std::string::npos)
        << e.what();
  }
  // One that is not JSON: where it stops being JSON (util/json_error.h).
  {
    std::ofstream out(scratch.file("adapter_config.json"), std::ios::trunc);
    out << "{\"r\": 3,, }";
  }
  try {
    load_adapter(*c.backend, wrong, scratch.path());
    FAIL() << "a broken adapter_config.json was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), scratch.file("adapter_config.json") +
                                         ": JSON syntax error at byte 9 (line 1, column 9): "
                                         "syntax error while parsing object key - unexpected "
                                         "','; expected string literal");
  }
}

// export --merge: the merged base alone computes what base and adapters
// computed together, written in Hugging Face's layout.
TEST(Lora, AMergedModelComputesWhatBaseAndAdaptersDid) {
  testing::TempDir scratch;
  CpuRun a, b;
  Transformer adapted(*a.backend, tiny(true), lora_options(kAllTargets, 0.0f));
  adapted.init_random(7);
  randomize_adapters(adapted, 9);
  const Batch batch = make_batch(23, 3);
  const double before = loss_of(adapted, *a.backend, batch);
  adapted.merge_adapters();
  save_checkpoint(*a.backend, adapted, scratch.path());
  TransformerOptions plain;
  plain.attention_block_size = 4;
  plain.loss.chunk_size = 5;
  Transformer merged(*b.backend, tiny(true), plain);
  load_weights(*b.backend, merged, scratch.path());
  const double after = loss_of(merged, *b.backend, batch);
  EXPECT_NE(before, loss_of(adapted, *a.backend, batch)) << "the adapters changed the loss";
  EXPECT_NEAR(after, before, 1e-5 * before);
}

}  // namespace
}  // namespace headroom
