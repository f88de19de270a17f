#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "test_util/temp_dir.h"
#include "train/lr_schedule.h"
#include "train/train_state.h"
#include "util/error.h"

namespace headroom {
namespace {

TEST(LrSchedule, WarmsUpLinearlyThenDecaysToMinLr) {
  LrSchedule s{
      .lr = 1.0, .min_lr = 0.1, .warmup_steps = 4, .total_steps = 13, .decay = Decay::kCosine};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0) << "decay starts from the peak";
  EXPECT_NEAR(s.at(8), 0.55, 1e-12) << "cosine midpoint (decay runs over steps 4..12)";
  EXPECT_NEAR(s.at(12), 0.1, 1e-12) << "the last step reaches min_lr";
  s.decay = Decay::kLinear;
  EXPECT_NEAR(s.at(8), 0.55, 1e-12);
  EXPECT_NEAR(s.at(11), 1.0 - 0.9 * 7.0 / 8.0, 1e-12);
  s.decay = Decay::kConstant;
  EXPECT_DOUBLE_EQ(s.at(12), 1.0);
}

TEST(LrSchedule, NoWarmupAndOneStepRunsAreWellDefined) {
  LrSchedule s{
      .lr = 2.0, .min_lr = 0.0, .warmup_steps = 0, .total_steps = 1, .decay = Decay::kCosine};
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  s.total_steps = 3;
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_NEAR(s.at(2), 0.0, 1e-12);
}

}  // namespace
}  // namespace headroom

#include <limits>
#include <random>

#include "model/transformer.h"
#include "train/train_test_util.h"
#include "train/trainer.h"

namespace headroom {
namespace {

ModelConfig small_model() {
  return testing::small_model(2, true);
}

std::vector<std::vector<int32_t>> documents(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> docs;
  for (int64_t len : {7, 12, 3, 9}) {
    docs.emplace_back(static_cast<size_t>(len));
    for (auto& t : docs.back())
      t = static_cast<int32_t>(rng() % 19);
  }
  return docs;
}

struct TrainingSetup {
  Allocator allocator{make_host_source(), AllocatorOptions{}};
  std::unique_ptr<Backend> backend = make_cpu_backend(allocator);
  TransformerOptions options;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<Trainer> trainer;
  TrainingSetup() {
    options.attention_block_size = 4;
    model = std::make_unique<Transformer>(*backend, small_model(), options);
    model->init_random(2);
    optimizer = std::make_unique<AdamW>(*backend, model->layouts(), model->params(), AdamWConfig{});
    TrainerOptions t;
    t.schedule = LrSchedule{
        .lr = 1e-2, .min_lr = 0, .warmup_steps = 0, .total_steps = 10, .decay = Decay::kConstant};
    trainer = std::make_unique<Trainer>(*backend, *model, *optimizer, t);
  }
};

// The loss is the mean over every counted token of the step, so splitting
// the same documents into more micro-batches changes nothing but rounding.
TEST(Trainer, GradientAccumulationEqualsOneBigBatch) {
  const auto docs = documents(5);
  TrainingSetup one, two;
  Batch all;
  for (const auto& d : docs)
    append_document(all, d.data(), static_cast<int64_t>(d.size()));
  Batch first, second;
  append_document(first, docs[0].data(), 7);
  append_document(first, docs[1].data(), 12);
  append_document(second, docs[2].data(), 3);
  append_document(second, docs[3].data(), 9);
  StepRecord a = one.trainer->step(0, {all});
  StepRecord b = two.trainer->step(0, {first, second});
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NEAR(a.loss, b.loss, 1e-6 * a.loss);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm);
  EXPECT_EQ(b.micro_batches, 2);
  for (size_t g = 0; g < one.model->params().size(); ++g) {
    const Tensor& x = one.model->params()[g].flat;
    const Tensor& y = two.model->params()[g].flat;
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_NEAR(x.data<float>()[i], y.data<float>()[i], 1e-6) << g << " " << i;
  }
}

TEST(Trainer, LossFallsOnARepeatedBatch) {
  TrainingSetup s;
  Batch all;
  for (const auto& d : documents(8))
    append_document(all, d.data(), static_cast<int64_t>(d.size()));
  const double first = s.trainer->step(0, {all}).loss;
  double last = first;
  for (int i = 1; i < 30; ++i)
    last = s.trainer->step(i, {all}).loss;
  EXPECT_LT(last, 0.5 * first);
}

TEST(Trainer, ANonFiniteStepIsSkippedAndLeaksNothing) {
  TrainingSetup s;
  Batch all;
  for (const auto& d : documents(9))
    append_document(all, d.data(), static_cast<int64_t>(d.size()));
  s.trainer->step(0, {all});
  const uint64_t allocated = s.allocator.allocated();
  // Poison one weight of the last block: loss and gradients become NaN.
  Tensor& w = s.model->params()[2].flat;
  const float kept = w.data<float>()[5];
  w.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> before(w.data<float>(), w.data<float>() + w.numel());
  StepRecord r = s.trainer->step(1, {all});
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(s.trainer->skipped_steps(), 1);
  EXPECT_EQ(s.allocator.allocated(), allocated) << "nothing of the skipped step stays allocated";
  for (int64_t i = 0; i < w.numel(); ++i)
    if (i != 5) {
      ASSERT_EQ(w.data<float>()[i], before[static_cast<size_t>(i)]) << "not updated";
    }
  for (FlatGroup& g : s.model->grads())
    for (int64_t i = 0; i < g.flat.numel(); ++i)
      ASSERT_EQ(g.flat.data<float>()[i], 0.0f) << "gradients cleared for the next step";
  w.data<float>()[5] = kept;
  EXPECT_FALSE(s.trainer->step(2, {all}).skipped) << "training goes on";
}

}  // namespace
}  // namespace headroom

#include <filesystem>

#include "data/batcher.h"
#include "data/markov.h"
#include "data/token_dataset.h"

namespace headroom {
namespace {

// DESIGN's model check: on a source of known entropy the loss falls to that
// entropy. A 32-token order-1 Markov chain with 4 successors per token is
// learnable in a few hundred steps by a one-block model.
TEST(Trainer, LossFallsToTheEntropyOfAMarkovSource) {
  const testing::TempDir tmp;  // of its own: two checkouts may run the suite at once
  const std::string path = tmp.file("markov.h5");
  MarkovSpec spec;
  spec.vocab_size = 32;
  spec.branching = 4;
  spec.seed = 3;
  const double entropy = write_markov_corpus(path, spec, LengthSpec::uniform(16, 64), 400, 3);
  TokenDataset dataset = TokenDataset::open(path, 32);
  BatchOptions pack;
  pack.max_tokens_per_micro_batch = 256;
  Batcher batcher(dataset, pack);

  ModelConfig c;
  c.name = "markov-test";
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 32;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 16;
  Allocator allocator(make_host_source(), AllocatorOptions{});
  std::unique_ptr<Backend> backend = make_cpu_backend(allocator);
  TransformerOptions options;
  options.attention_block_size = 32;
  Transformer model(*backend, c, options);
  model.init_random(1);
  AdamWConfig adamw;
  adamw.weight_decay = 0;
  AdamW optimizer(*backend, model.layouts(), model.params(), adamw);
  const int64_t steps = 200;
  TrainerOptions t;
  t.schedule = LrSchedule{.lr = 1e-2,
                          .min_lr = 1e-3,
                          .warmup_steps = 10,
                          .total_steps = steps,
                          .decay = Decay::kCosine};
  Trainer trainer(*backend, model, optimizer, t);
  double first = 0, tail = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const double loss = trainer.step(step, batcher.next_step()).loss;
    if (step == 0) first = loss;
    if (step >= steps - 20) tail += loss / 20;
  }
  EXPECT_NEAR(first, std::log(32.0), 0.3) << "starts near uniform";
  RecordProperty("final_loss", std::to_string(tail));
  RecordProperty("entropy", std::to_string(entropy));
  EXPECT_LT(tail, entropy + 0.15) << "entropy " << entropy << ", final loss " << tail;
  EXPECT_GT(tail, entropy - 0.1) << "no model beats the source's entropy by much on fresh data";
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// A trainer_state.json that is not JSON names the file and where it stops
// being JSON (util/json_error.h).
TEST(TrainState, ABrokenTrainerStateNamesTheFileAndTheByte) {
  testing::TempDir dir;
  {
    std::ofstream out(dir.file("trainer_state.json"));
    out << "{\"format_version\": 1, \"step\": }";
  }
  try {
    read_train_state(dir.path());
    FAIL() << "read a broken trainer_state.json";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("trainer_state.json") +
                                         ": JSON syntax error at byte 31 (line 1, column 31): "
                                         "syntax error while parsing value - unexpected '}'; "
                                         "expected '[', '{', or a literal");
  }
}

// Every field reads back as written; an older file without
// micro_batches_per_step reads as 0 (not recorded), a bad one is refused.
TEST(TrainState, RoundTripsAndRecordsTheMicroBatchesOfAStep) {
  testing::TempDir dir;
  const TrainState state{.step = 7,
                         .updates = 6,
                         .skipped = 1,
                         .data_epoch = 2,
                         .data_position = 40,
                         .optimizer_shards = 2,
                         .sharded_format = true,
                         .loss_scale = 1024,
                         .scale_clean_steps = 3,
                         .tensor_parallel = 2,
                         .micro_batches_per_step = 8};
  save_trainer_state(state, dir.path());
  EXPECT_EQ(read_train_state(dir.path()), state);
  {
    std::ofstream out(dir.file("trainer_state.json"));
    out << R"({"format_version": 1, "step": 3, "updates": 3, "skipped": 0,
              "data_cursor": {"epoch": 0, "position": 6}})";
  }
  EXPECT_EQ(read_train_state(dir.path()).micro_batches_per_step, 0);
  {
    std::ofstream out(dir.file("trainer_state.json"));
    out << R"({"format_version": 1, "step": 3, "updates": 3, "skipped": 0,
              "data_cursor": {"epoch": 0, "position": 6}, "micro_batches_per_step": 0})";
  }
  try {
    read_train_state(dir.path());
    FAIL() << "read micro_batches_per_step = 0";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("trainer_state.json") + ": \"micro_batches_per_step\" must be >= 1, got 0");
  }
}

}  // namespace
}  // namespace headroom
