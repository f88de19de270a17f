// The whole decoder against finite differences, checkpointing, chunking and
// dense_additive attention against the plain path, and meta against cpu
// allocation by allocation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>

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

std::vector<std::vector<float>> gradients_with(const TransformerOptions& options, double* loss,
                                               const Batch* given = nullptr) {
  CpuRun run;
  Transformer model(*run.backend, tiny(true, false, false), options);
  model.init_random(5);
  const Batch batch = given ? *given : make_batch(model.config().vocab_size, 9);
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

// Three documents (9, 14, 5) as a padded (B, S) = (3, 14) batch.
Batch padded_batch(int64_t vocab) {
  std::mt19937_64 rng(11);
  Batch b;
  for (int64_t len : {9, 14, 5}) {
    std::vector<int32_t> doc(static_cast<size_t>(len));
    for (auto& t : doc)
      t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    append_document(b, doc.data(), len);
    if (len < 14) append_padding(b, 14 - len, 0);
  }
  return b;
}

// attention.backend = "dense_additive" is the same function as block_sparse
// (only its memory differs): every mask kind, packed (one row) and padded
// (a row per document), with and without recomputation.
TEST(Transformer, DenseAdditiveAttentionChangesNoGradient) {
  const Batch padded = padded_batch(23);
  struct Variant {
    AttentionMaskKind mask;
    int64_t window, mask_block;
    bool padded;
  };
  for (const Variant& v : {Variant{AttentionMaskKind::kDocument, 0, 0, false},
                           Variant{AttentionMaskKind::kCausal, 0, 0, false},
                           Variant{AttentionMaskKind::kSlidingWindow, 4, 0, false},
                           Variant{AttentionMaskKind::kDflashBlock, 0, 3, false},
                           Variant{AttentionMaskKind::kDocument, 0, 0, true},
                           Variant{AttentionMaskKind::kDflashBlock, 0, 4, true}}) {
    TransformerOptions plain;
    plain.attention_block_size = 4;
    plain.attention_mask = v.mask;
    plain.attention_window = v.window;
    plain.attention_mask_block = v.mask_block;
    const Batch* batch = v.padded ? &padded : nullptr;
    double base_loss = 0;
    const auto base = gradients_with(plain, &base_loss, batch);
    for (int interval : {0, 1}) {
      TransformerOptions o = plain;
      o.attention_dense = true;
      o.rows_are_documents = v.padded;
      o.checkpoint_interval = interval;
      double loss = 0;
      const auto g = gradients_with(o, &loss, batch);
      const std::string what = std::string(name_of(v.mask)) + (v.padded ? " padded" : " packed") +
                               " interval " + std::to_string(interval);
      EXPECT_NEAR(loss, base_loss, 1e-5 * std::abs(base_loss)) << what;
      for (size_t i = 0; i < g.size(); ++i)
        for (size_t j = 0; j < g[i].size(); ++j)
          ASSERT_NEAR(g[i][j], base[i][j], 1e-5 + 1e-4 * std::abs(base[i][j]))
              << what << " group " << i << " element " << j;
    }
  }
}

// Promise 1 at the model level: meta makes exactly cpu's allocations.
TEST(Transformer, MetaMakesExactlyTheCpuAllocations) {
  for (int interval : {0, 1}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (bool dense : {false, true}) {
        TransformerOptions o;
        o.dtype = dtype;
        o.attention_dense = dense;
        o.attention_block_size = 4;
        o.checkpoint_interval = interval;
        o.loss.chunk_size = 7;
        SCOPED_TRACE("interval " + std::to_string(interval) + " " + std::string(name_of(dtype)) +
                     (dense ? " dense" : ""));
        testing::expect_meta_makes_the_cpu_allocations(tiny(true, true, true), o,
                                                       make_batch(23, 4));
      }
    }
  }
}

// The plan of a dense_additive layer holds what PyTorch's math path holds at
// its peak, inside _safe_softmax: HF's mask, repeat_kv's copies, the fp32
// q, k, v and their scaled copies, and four (B, H, S, S) tensors (scores,
// softmax, the -inf test in bytes, the result).
TEST(Transformer, DenseAdditivePeaksInsideTheSafeSoftmax) {
  TransformerOptions o;
  o.dtype = DType::kBF16;
  o.attention_dense = true;
  const Batch batch = make_batch(23, 4);  // T = 24, one row: B = 1, S = 24
  const testing::StepEvents plan = testing::record_step(
      BackendKind::kMeta, tiny(true, false, false), o, batch,  // H 4, KV 2, D 6
      AllocatorPolicy::kExact);
  const std::vector<std::string>& tags = plan.tags;
  const uint64_t S = 24, H = 4, D = 6, heads_f32 = H * S * D * 4, scores = H * S * S * 4;
  std::map<std::string, uint64_t> bytes;
  int64_t live = 0, peak = 0;
  for (const MemoryEvent& e : plan.events) {
    if (e.category != Category::kAttention) continue;
    if (e.action == MemoryAction::kAlloc) {
      bytes[tags[e.tag_id]] = e.bytes;
      live += static_cast<int64_t>(e.bytes);
    } else if (e.action == MemoryAction::kFree) {
      live -= static_cast<int64_t>(e.bytes);
    }
    if (e.phase == Phase::kForward && e.layer == 0) peak = std::max(peak, live);
  }
  EXPECT_EQ(bytes["attn.mask"], S * S * 2);
  EXPECT_EQ(bytes["block.0.attn.k_repeated"], H * S * D * 2);
  EXPECT_EQ(bytes["block.0.attn.q_scaled"], heads_f32);
  EXPECT_EQ(bytes["block.0.attn.scores"], scores);
  EXPECT_EQ(bytes["block.0.attn.softmax.neg_inf"], H * S * S);
  EXPECT_EQ(bytes["block.0.attn.probs"], scores);
  EXPECT_EQ(bytes["block.0.attn.probs_returned"], H * S * S * 2);
  EXPECT_EQ(bytes["block.0.attn.probs.grad"], scores);
  EXPECT_EQ(bytes["block.0.attn.scores.grad"], scores);
  const uint64_t expected = S * S * 2                 // the mask
                            + 2 * H * S * D * 2       // k, v repeated (bf16)
                            + 5 * heads_f32           // q, k, v fp32; q, k scaled
                            + 3 * scores + H * S * S  // scores, softmax, probs; neg_inf
                            + H * S;                  // neg_inf_rows
  EXPECT_EQ(static_cast<uint64_t>(peak), expected);
}

}  // namespace
}  // namespace headroom

#include <filesystem>

#include "model/safetensors.h"
#include "model/weights.h"
#include "test_util/temp_dir.h"

namespace headroom {
namespace {

TEST(Weights, SaveThenLoadGivesTheSameModelAndHuggingFaceNames) {
  const testing::TempDir tmp;  // of its own: two checkouts may run the suite at once
  const std::string dir = tmp.file("weights");
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
}

}  // namespace
}  // namespace headroom
