// The whole decoder against finite differences, checkpointing and chunking
// against the plain path, and meta against cpu allocation by allocation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "model/transformer.h"
#include "train_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

constexpr float kWeightScale = 3.0f;

using testing::CpuRun;
using testing::loss_of;
using testing::make_batch;

ModelConfig tiny(bool qk_norm, bool bias, bool tied) {
  return testing::tiny_decoder(qk_norm, bias, tied);
}

class TransformerGradients : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {};

TEST_P(TransformerGradients, MatchFiniteDifferences) {
  auto [qk_norm, bias, tied] = GetParam();
  CpuRun run;
  TransformerOptions options;
  options.attention_block_size = 4;  // several tiles, some partial
  options.loss.chunk_size = 5;
  Transformer model(*run.backend, tiny(qk_norm, bias, tied), options);
  model.init_random(7);
  // Larger weights than the 0.02 init, so every path carries signal.
  for (FlatGroup& g : model.params())
    for (int64_t i = 0; i < g.flat.numel(); ++i)
      g.flat.data<float>()[i] *= kWeightScale;
  const Batch batch = make_batch(model.config().vocab_size, 3);

  testing::expect_gradients_match_finite_differences(model, *run.backend, batch, 12);
}

INSTANTIATE_TEST_SUITE_P(Variants, TransformerGradients,
                         ::testing::Values(std::make_tuple(true, false, true),    // Qwen3
                                           std::make_tuple(false, true, false),   // Qwen2
                                           std::make_tuple(false, false, false),  // Llama
                                           std::make_tuple(true, false, false),
                                           std::make_tuple(false, false, true)));

std::vector<std::vector<float>> gradients_with(const TransformerOptions& options, double* loss) {
  CpuRun run;
  Transformer model(*run.backend, tiny(true, false, false), options);
  model.init_random(5);
  const Batch batch = make_batch(model.config().vocab_size, 9);
  Tensor loss_sum = run.backend->empty({1}, DType::kF32, Category::kWorkspace, "loss");
  run.backend->fill(loss_sum, 0.0f);
  model.forward_backward(batch, 1.0f / static_cast<float>(batch.counted), loss_sum);
  float host = 0;
  run.backend->copy_to_host(loss_sum, &host);
  *loss = host;
  std::vector<std::vector<float>> out;
  for (FlatGroup& g : model.grads())
    out.emplace_back(g.flat.data<float>(), g.flat.data<float>() + g.flat.numel());
  return out;
}

TEST(Transformer, CheckpointingAndLossChunkingChangeNoGradient) {
  TransformerOptions plain;
  plain.attention_block_size = 4;
  double base_loss = 0;
  const auto base = gradients_with(plain, &base_loss);
  for (int interval : {1, 2}) {
    for (int64_t chunk : {0, 3, 100}) {
      for (bool save : {false, true}) {
        TransformerOptions o = plain;
        o.checkpoint_interval = interval;
        o.loss.chunk_size = chunk;
        o.loss.save_softmax = save;
        double loss = 0;
        const auto g = gradients_with(o, &loss);
        EXPECT_NEAR(loss, base_loss, 1e-5 * std::abs(base_loss));
        for (size_t i = 0; i < g.size(); ++i)
          for (size_t j = 0; j < g[i].size(); ++j)
            ASSERT_NEAR(g[i][j], base[i][j], 1e-5 + 1e-4 * std::abs(base[i][j]))
                << "interval " << interval << " chunk " << chunk << " group " << i;
      }
    }
  }
}

struct Recorder : MemoryObserver {
  std::vector<MemoryEvent> events;
  void on_memory_event(const MemoryEvent& e) override { events.push_back(e); }
};

// Promise 1 at the model level: meta makes exactly cpu's allocations.
TEST(Transformer, MetaMakesExactlyTheCpuAllocations) {
  for (int interval : {0, 1}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      TransformerOptions o;
      o.dtype = dtype;
      o.attention_block_size = 4;
      o.checkpoint_interval = interval;
      o.loss.chunk_size = 7;
      std::vector<MemoryEvent> seen[2];
      std::vector<std::string> tags[2];
      for (int m = 0; m < 2; ++m) {
        Allocator allocator(m ? make_virtual_source() : make_host_source(), AllocatorOptions{});
        Recorder rec;
        allocator.add_observer(&rec);
        {
          std::unique_ptr<Backend> backend =
              m ? make_meta_backend(allocator) : make_cpu_backend(allocator);
          Transformer model(*backend, tiny(true, true, true), o);
          model.init_random(1);
          Tensor loss_sum = backend->empty({1}, DType::kF32, Category::kWorkspace, "loss");
          backend->fill(loss_sum, 0.0f);
          const Batch batch = make_batch(23, 4);
          model.forward_backward(batch, 0.1f, loss_sum);
        }
        allocator.remove_observer(&rec);
        seen[m] = rec.events;
        tags[m] = allocator.tags();
      }
      ASSERT_EQ(seen[0].size(), seen[1].size());
      for (size_t i = 0; i < seen[0].size(); ++i) {
        ASSERT_EQ(seen[0][i].action, seen[1][i].action) << i;
        ASSERT_EQ(seen[0][i].bytes, seen[1][i].bytes) << i;
        ASSERT_EQ(tags[0][seen[0][i].tag_id], tags[1][seen[1][i].tag_id]) << i;
        ASSERT_EQ(seen[0][i].phase, seen[1][i].phase) << i;
        ASSERT_EQ(seen[0][i].layer, seen[1][i].layer) << i;
      }
    }
  }
}

}  // namespace
}  // namespace headroom

#include <filesystem>

#include "model/safetensors.h"
#include "model/weights.h"

namespace headroom {
namespace {

TEST(Weights, SaveThenLoadGivesTheSameModelAndHuggingFaceNames) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "headroom_weights_test").string();
  std::filesystem::remove_all(dir);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    CpuRun a, b;
    TransformerOptions o;
    o.dtype = dtype;
    o.attention_block_size = 4;
    Transformer saved(*a.backend, tiny(true, false, true), o);
    saved.init_random(3);
    save_checkpoint(*a.backend, saved, dir);
    Transformer loaded(*b.backend, tiny(true, false, true), o);
    loaded.init_random(99);  // different, then overwritten
    load_weights(*b.backend, loaded, dir);
    for (size_t g = 0; g < saved.params().size(); ++g) {
      const Tensor& x = saved.params()[g].flat;
      const Tensor& y = loaded.params()[g].flat;
      ASSERT_EQ(0, std::memcmp(x.raw(), y.raw(), x.nbytes())) << saved.layouts()[g].name;
    }
    SafetensorsIndex index = SafetensorsIndex::open(dir);
    EXPECT_NE(index.find("model.embed_tokens.weight"), nullptr);
    EXPECT_NE(index.find("model.layers.1.self_attn.q_norm.weight"), nullptr);
    EXPECT_NE(index.find("model.layers.0.mlp.down_proj.weight"), nullptr);
    EXPECT_EQ(index.find("lm_head.weight"), nullptr) << "tied: stored once, as transformers does";
    EXPECT_TRUE(std::filesystem::exists(dir + "/config.json"));
    // A different architecture's checkpoint is refused by name.
    try {
      check_weights(tiny(false, true, false), dir);
      FAIL();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("k_norm.weight: not a parameter"), std::string::npos)
          << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headroom
