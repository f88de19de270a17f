// The step cost the counterfactuals are ranked by, against counts done by hand.
#include "advice/step_cost.h"

#include <gtest/gtest.h>

#include "model/model_config.h"

namespace headroom {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.vocab_size = 1000;
  m.hidden_size = 64;
  m.intermediate_size = 128;
  m.num_layers = 4;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  return m;
}

ExperimentConfig base_config() {
  ExperimentConfig c;
  c.model.dtype = Precision::kBf16;
  c.batch.mode = BatchSection::Mode::kPacked;
  c.batch.max_tokens_per_micro_batch = 8;
  return c;
}

// Forward FLOPs of one block and of the head over `T` tokens in causal rows of `W`.
double block_forward(const ModelConfig& m, double T, double W) {
  const double C = 64, F = 128, HD = 64, KVD = 32;
  const double weights = C * HD + 2 * C * KVD + HD * C + 3 * C * F;
  return 2 * weights * T + 4 * HD * (W * (W + 1) / 2) * (T / W) + 0 * m.num_layers;
}

TEST(StepCost, CountsForwardAndTwiceItBackwardForFullFineTuning) {
  const ModelConfig m = small_model();
  const ExperimentConfig c = base_config();
  const StepShape shape{16, 8, 1};
  const StepCost cost = step_cost(c, m, 1, shape);
  const double block = block_forward(m, 16, 8);
  const double head = 2.0 * 1000 * 64 * 16;
  // Backward: dX and dW of every matmul, attention's two backward matmuls.
  EXPECT_DOUBLE_EQ(cost.flops, 3 * (4 * block + head));
  EXPECT_EQ(cost.recompute_flops, 0);
  EXPECT_EQ(cost.comm_bytes, 0) << "one rank moves nothing";
}

TEST(StepCost, AttentionCountsThePairsEachMaskComputes) {
  ExperimentConfig c = base_config();
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 36);  // document: 1 + 2 + ... + 8
  c.attention.mask = AttentionSection::Mask::kCausal;
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 36);
  c.attention.mask = AttentionSection::Mask::kSlidingWindow;
  c.attention.window = 3;
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 24);
  c.attention.window = 0;
  c.attention.mask = AttentionSection::Mask::kDflashBlock;
  c.attention.mask_block = 3;  // blocks of 3, 3, 2: 3*3 + 3*6 + 2*8
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 43);
  c.attention.mask_block = 1;  // every token its own block: causal
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 36);
  c.attention.mask_block = 16;  // one block: bidirectional
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 64);
  c.attention.mask_block = 3;
  c.attention.backend = AttentionSection::Backend::kDenseAdditive;
  EXPECT_DOUBLE_EQ(pairs_per_row(c, 8), 64) << "the math path computes every pair";
}

TEST(StepCost, FullCheckpointingRecomputesEveryBlocksForwardAndEveryTwoHalf) {
  const ModelConfig m = small_model();
  ExperimentConfig c = base_config();
  const StepShape shape{16, 8, 1};
  const double none = step_cost(c, m, 1, shape).flops;
  c.checkpoint.activations = 1;
  const StepCost full = step_cost(c, m, 1, shape);
  EXPECT_DOUBLE_EQ(full.recompute_flops, 4 * block_forward(m, 16, 8));
  EXPECT_DOUBLE_EQ(full.flops, none + full.recompute_flops);
  c.checkpoint.activations = 2;
  EXPECT_DOUBLE_EQ(step_cost(c, m, 1, shape).recompute_flops, 2 * block_forward(m, 16, 8));
  c.checkpoint.activations = 3;  // blocks 0 and 3
  EXPECT_DOUBLE_EQ(step_cost(c, m, 1, shape).recompute_flops, 2 * block_forward(m, 16, 8));
}

TEST(StepCost, RecomputedLossChunksAddTheHeadsForwardSavedOnesDoNot) {
  const ModelConfig m = small_model();
  ExperimentConfig c = base_config();
  const StepShape shape{16, 8, 1};
  c.loss.chunk_size = 4;
  c.loss.mode = LossSection::Mode::kSave;
  EXPECT_EQ(step_cost(c, m, 1, shape).recompute_flops, 0);
  c.loss.mode = LossSection::Mode::kRecompute;
  EXPECT_DOUBLE_EQ(step_cost(c, m, 1, shape).recompute_flops, 2.0 * 1000 * 64 * 16);
}

TEST(StepCost, ZeroThreeGathersParametersPerMicroBatchOnTopOfTheGradients) {
  const ModelConfig m = small_model();
  ExperimentConfig c = base_config();
  const StepShape shape{16, 8, 4};
  const double P = static_cast<double>(m.num_parameters());
  c.zero.stage = 2;
  // Reduce-scatter and all-gather of bf16, (n - 1) / n of it each, at 4 ranks.
  EXPECT_DOUBLE_EQ(step_cost(c, m, 4, shape).comm_bytes, 2 * 0.75 * P * 2);
  c.zero.stage = 3;
  EXPECT_DOUBLE_EQ(step_cost(c, m, 4, shape).comm_bytes, 0.75 * (2 * 4 * P * 2 + P * 2));
  c.checkpoint.activations = 1;  // and once more for the recompute
  EXPECT_DOUBLE_EQ(step_cost(c, m, 4, shape).comm_bytes, 0.75 * (3 * 4 * P * 2 + P * 2));
}

TEST(StepCost, TensorParallelRanksComputeTheirPartOfEachBlockAndAllReduceActivations) {
  const ModelConfig m = small_model();
  ExperimentConfig c = base_config();
  c.parallel.tensor = 2;
  const StepShape shape{16, 8, 1};
  const double block = block_forward(m, 16, 8), head = 2.0 * 1000 * 64 * 16;
  // 4 ranks: 2 groups of 2. A rank computes half of every block, the whole
  // head; the gradients of its parameters (half of each block's) go over
  // the 2 data-parallel ranks, and each layer's 4 activation all-reduces of
  // (16, 64) over the group.
  const StepCost cost = step_cost(c, m, 4, shape);
  EXPECT_DOUBLE_EQ(cost.flops, 3 * (4 * block / 2 + head));
  const double block_weights = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128;
  const double P = static_cast<double>(m.num_parameters()) - 4 * block_weights / 2;
  const double activations = 4 * 4 * (2 * 0.5) * 16 * 64 * 2;
  EXPECT_DOUBLE_EQ(cost.comm_bytes, 2 * 0.5 * P * 2 + activations);
  // A recomputed block all-reduces its forward's two again.
  c.checkpoint.activations = 1;
  EXPECT_DOUBLE_EQ(step_cost(c, m, 4, shape).comm_bytes,
                   2 * 0.5 * P * 2 + activations + 4 * 2 * (2 * 0.5) * 16 * 64 * 2);
}

TEST(StepCost, AFrozenBaseSkipsTheWeightGradientsAndMovesOnlyTheAdapters) {
  const ModelConfig m = small_model();
  ExperimentConfig c = base_config();
  const StepShape shape{16, 8, 1};
  const double full = step_cost(c, m, 2, shape).flops;
  c.lora.enabled = true;
  c.lora.rank = 2;
  c.lora.targets = {"q_proj", "v_proj"};
  const StepCost lora = step_cost(c, m, 2, shape);
  EXPECT_LT(lora.flops, full);
  EXPECT_GT(lora.flops, full * 2 / 3) << "forward and dX remain";
  // Adapters: r (C + HD) for q, r (C + KVD) for v, per block, all-reduced.
  const double adapters = 4 * (2 * (64 + 64) + 2 * (64 + 32));
  EXPECT_DOUBLE_EQ(lora.comm_bytes, 2 * 0.5 * adapters * 2);
}

TEST(StepCost, OffloadMovesTheGradientsDownAndTheParametersBack) {
  const ModelConfig m = small_model();
  ExperimentConfig c = base_config();
  c.zero.offload_optimizer = true;
  const StepCost cost = step_cost(c, m, 1, StepShape{16, 8, 1});
  EXPECT_DOUBLE_EQ(cost.host_bytes, static_cast<double>(m.num_parameters()) * 2 * 2);
}

TEST(StepCost, RatesFollowTheDevicePresetAndSecondsAddTheParts) {
  ExperimentConfig c = base_config();
  c.run.backend = RunSection::Backend::kCuda;
  c.memory.device = "a100-80gb";
  const DeviceRates a100 = device_rates(c);
  c.memory.device = "h100-80gb";
  const DeviceRates h100 = device_rates(c);
  EXPECT_GT(h100.flops_per_second, 3 * a100.flops_per_second);
  EXPECT_NE(h100.source.find("h100-80gb"), std::string::npos);
  StepCost cost;
  cost.flops = h100.flops_per_second;
  cost.comm_bytes = h100.link_bytes_per_second;
  EXPECT_DOUBLE_EQ(seconds_of(cost, h100), 2.0);
}

}  // namespace
}  // namespace headroom
