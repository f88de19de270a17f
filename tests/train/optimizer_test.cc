// The optimizer's memory and state per setting (train/optimizer.h): the
// bytes of each optimizer tag for optimizer.master_dtype and
// optimizer.kind on meta (the plan's accounting), cpu training with each,
// "bf16" being numerically "none", and the 8-bit states' round trip
// through a checkpoint (uint8 tensors stored as U8).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "model/transformer.h"
#include "test_util/temp_dir.h"
#include "train/optimizer.h"
#include "train/train_state.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace headroom {
namespace {

// The live bytes of category optim by the tag's last part: "master",
// "adam_m", "adam_v8", "absmax", ...
std::map<std::string, uint64_t> optimizer_bytes(const Allocator& allocator) {
  std::map<std::string, uint64_t> bytes;
  for (const LiveBlock& block : allocator.largest_live_blocks(1 << 20)) {
    if (block.category != Category::kOptim) continue;
    const std::string& tag = block.tag;
    std::string kind = tag.substr(tag.find_last_of('.') + 1);
    bytes[kind] += block.bytes;
  }
  return bytes;
}

struct Counts {
  int64_t params = 0;   // trainable parameters
  int64_t params8 = 0;  // in tensors of >= 4096 elements
  int64_t blocks = 0;   // their absmax blocks of 256
};

Counts counts_of(const std::vector<GroupLayout>& layouts) {
  Counts c;
  for (const GroupLayout& layout : layouts)
    for (const ParamSpec& spec : layout.specs) {
      const int64_t n = numel_of(spec.shape);
      c.params += n;
      if (n >= 4096) {
        c.params8 += n;
        c.blocks += (n + 255) / 256;
      }
    }
  return c;
}

std::map<std::string, uint64_t> plan_bytes(const AdamWConfig& config, Counts* counts = nullptr) {
  Allocator allocator(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  std::unique_ptr<Backend> backend = make_meta_backend(allocator, TargetDevice::kCuda);
  TransformerOptions options;
  options.dtype = DType::kBF16;
  Transformer model(*backend, model_preset("tiny"), options);
  AdamW optimizer(*backend, model.layouts(), model.params(), config);
  if (counts) *counts = counts_of(model.layouts());
  return optimizer_bytes(allocator);
}

TEST(AdamWMemory, MasterDtypeMovesTheMasterBytesOnly) {
  Counts c;
  AdamWConfig config;
  const auto fp32 = plan_bytes(config, &c);
  config.master = MasterWeights::kBf16;
  const auto bf16 = plan_bytes(config);
  config.master = MasterWeights::kNone;
  const auto none = plan_bytes(config);
  // The quickstart's tiny model: 3,033,856 parameters.
  ASSERT_EQ(c.params, 3033856);
  const uint64_t p = static_cast<uint64_t>(c.params);
  EXPECT_EQ(fp32.at("master"), 4 * p);
  EXPECT_EQ(bf16.at("master"), 2 * p);
  EXPECT_EQ(none.count("master"), 0u);
  for (const auto* bytes : {&fp32, &bf16, &none}) {
    EXPECT_EQ(bytes->at("adam_m"), 4 * p);
    EXPECT_EQ(bytes->at("adam_v"), 4 * p);
    EXPECT_EQ(bytes->size(), bytes == &none ? 2u : 3u);
  }
}

TEST(AdamWMemory, EightBitKeepsOneByteAMomentAndAnAbsmaxABlock) {
  Counts c;
  AdamWConfig config;
  config.eight_bit = true;
  const auto bytes = plan_bytes(config, &c);
  const uint64_t p = static_cast<uint64_t>(c.params), p8 = static_cast<uint64_t>(c.params8);
  const uint64_t blocks = static_cast<uint64_t>(c.blocks);
  // tiny: every matrix is 8-bit; the norm weights (256 and 64 elements) are
  // under min_8bit_size and keep fp32 moments.
  EXPECT_EQ(p - p8, 4u * (256 + 256 + 64 + 64) + 256);
  EXPECT_EQ(bytes.at("master"), 4 * p);
  EXPECT_EQ(bytes.at("adam_m8"), p8);
  EXPECT_EQ(bytes.at("adam_v8"), p8);
  EXPECT_EQ(bytes.at("absmax"), 2 * 4 * blocks);
  EXPECT_EQ(bytes.at("adam_m"), 4 * (p - p8));
  EXPECT_EQ(bytes.at("adam_v"), 4 * (p - p8));
  // ~2.03 bytes per parameter of moments instead of 8.
  const double per_param =
      static_cast<double>(bytes.at("adam_m8") + bytes.at("adam_v8") + bytes.at("absmax") +
                          bytes.at("adam_m") + bytes.at("adam_v")) /
      static_cast<double>(p);
  EXPECT_NEAR(per_param, 2.03, 0.01);
  config.master = MasterWeights::kNone;
  EXPECT_EQ(plan_bytes(config).count("master"), 0u);
}

TEST(AdamWMemory, EightBitShardsQuantizeTheirPartsInBlocksOfTheirOwn) {
  // Two ranks: a parameter cut by the shard boundary has a partial block at
  // the end of each part; the decision 8-bit or not is the whole tensor's.
  Allocator allocator(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  std::unique_ptr<Backend> backend = make_meta_backend(allocator);
  GroupLayout layout = GroupLayout::make(
      "block.0", {{"a.weight", {5000}}, {"norm.weight", {100}}, {"b.weight", {4096}}});
  std::vector<GroupLayout> layouts = {layout};
  AdamWConfig config;
  config.eight_bit = true;
  int64_t total_blocks = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const GroupShard shard = GroupShard::of(layout.numel, rank, 2);  // 4598 each
    Tensor param = backend->empty({shard.numel()}, DType::kF32, Category::kParam, "block.0");
    AdamW optimizer(*backend, layouts, {shard}, {param}, config, true);
    const auto bytes = optimizer_bytes(allocator);
    // rank 0: a[0, 4598); rank 1: a[4598, 5000), norm, b.
    const int64_t blocks = rank == 0 ? 18 : 2 + 16;
    EXPECT_EQ(bytes.at("absmax"), static_cast<uint64_t>(2 * 4 * blocks)) << rank;
    EXPECT_EQ(bytes.count("adam_m"), rank == 0 ? 0u : 1u) << rank;
    total_blocks += blocks;
  }
  EXPECT_EQ(total_blocks, 36);  // one rank: 20 + 16
}

// A small bf16 model trained a few steps with `config`; its parameters.
std::vector<std::vector<uint16_t>> train_bf16(const AdamWConfig& config, int steps,
                                              double* last_loss = nullptr) {
  testing::CpuRun run;
  TransformerOptions options;
  options.dtype = DType::kBF16;
  options.attention_block_size = 8;
  Transformer model(*run.backend, testing::tiny_decoder(true, false, false), options);
  model.init_random(3);
  AdamW optimizer(*run.backend, model.layouts(), model.params(), config);
  TrainerOptions t;
  t.schedule = LrSchedule{.lr = 1e-2,
                          .min_lr = 1e-2,
                          .warmup_steps = 0,
                          .total_steps = steps,
                          .decay = Decay::kConstant};
  Trainer trainer(*run.backend, model, optimizer, t);
  const Batch batch = testing::make_batch(23, 5);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    last = trainer.step(step, {batch}).loss;
    if (step == 0) first = last;
  }
  if (last_loss) *last_loss = last;
  EXPECT_LT(last, 0.7 * first) << name_of(config.master) << " 8-bit " << config.eight_bit;
  std::vector<std::vector<uint16_t>> params;
  for (const FlatGroup& group : model.params()) {
    params.emplace_back(static_cast<size_t>(group.flat.numel()));
    std::memcpy(params.back().data(), group.flat.raw(), group.flat.nbytes());
  }
  return params;
}

TEST(AdamWTraining, EveryMasterSettingTrainsAndBf16IsNone) {
  AdamWConfig config;
  config.weight_decay = 0.01f;
  double fp32_loss = 0, bf16_loss = 0, none_loss = 0;
  const auto fp32 = train_bf16(config, 20, &fp32_loss);
  config.master = MasterWeights::kBf16;
  const auto bf16 = train_bf16(config, 20, &bf16_loss);
  config.master = MasterWeights::kNone;
  const auto none = train_bf16(config, 20, &none_loss);
  EXPECT_EQ(bf16, none) << "a bf16 master holds exactly the bf16 weights";
  EXPECT_NE(fp32, none) << "an fp32 master keeps what bf16 rounding drops";
  EXPECT_EQ(bf16_loss, none_loss);
  RecordProperty("loss_fp32_master", std::to_string(fp32_loss));
  RecordProperty("loss_no_master", std::to_string(none_loss));
}

TEST(AdamWState, EightBitStatesRoundTripThroughACheckpoint) {
  testing::TempDir dir;
  testing::CpuRun run;
  TransformerOptions options;
  options.dtype = DType::kBF16;
  options.attention_block_size = 8;
  ModelConfig mc = testing::tiny_decoder(true, false, false);
  mc.hidden_size = 64;  // matrices of >= 4096 elements, so some states are 8-bit
  mc.intermediate_size = 128;
  mc.head_dim = 16;
  Transformer model(*run.backend, mc, options);
  model.init_random(3);
  AdamWConfig config;
  config.eight_bit = true;
  config.master = MasterWeights::kBf16;
  AdamW optimizer(*run.backend, model.layouts(), model.params(), config);
  TrainerOptions t;
  t.schedule = LrSchedule{
      .lr = 1e-2, .min_lr = 1e-2, .warmup_steps = 0, .total_steps = 2, .decay = Decay::kConstant};
  Trainer trainer(*run.backend, model, optimizer, t);
  trainer.step(0, {testing::make_batch(23, 5)});
  trainer.step(1, {testing::make_batch(23, 6)});
  TrainState state;
  state.step = 2;
  state.updates = 2;
  save_train_state(optimizer, state, dir.path());

  const SafetensorsIndex index = SafetensorsIndex::open(dir.path() + "/optimizer.safetensors");
  int eight_bit = 0;
  for (const SafetensorsEntry& e : index.entries()) {
    if (e.name.ends_with(".adam_m8") || e.name.ends_with(".adam_v8")) {
      EXPECT_EQ(e.dtype, SafetensorsDType::kU8) << e.name;
      ++eight_bit;
    }
    if (e.name.ends_with(".master")) {
      EXPECT_EQ(e.dtype, SafetensorsDType::kBF16) << e.name;
    }
  }
  EXPECT_GT(eight_bit, 0);

  AdamW restored(*run.backend, model.layouts(), model.params(), config);
  load_train_state(restored, model.layouts(), dir.path());
  const auto a = optimizer.state(), b = restored.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    ASSERT_EQ(a[i].second->nbytes(), b[i].second->nbytes());
    EXPECT_EQ(std::memcmp(a[i].second->raw(), b[i].second->raw(), a[i].second->nbytes()), 0)
        << a[i].first;
  }
}

}  // namespace
}  // namespace headroom
