// Loss scaling (optimizer.loss_scale; train/trainer.h): the scaled step
// updates as the unscaled one; a dynamic scale halves and skips on an fp16
// overflow, as PyTorch's GradScaler, and doubles after its interval of
// clean steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/transformer.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace headroom {
namespace {

struct ScaledTraining {
  Allocator allocator{make_host_source(), AllocatorOptions{}};
  std::unique_ptr<Backend> backend = make_cpu_backend(allocator);
  std::unique_ptr<Transformer> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<Trainer> trainer;
  ScaledTraining(DType dtype, double scale, bool dynamic, int64_t interval = 2000) {
    TransformerOptions o;
    o.dtype = dtype;
    o.attention_block_size = 4;
    o.loss.chunk_size = 5;
    model = std::make_unique<Transformer>(*backend, testing::tiny_decoder(true, false, true), o);
    model->init_random(2);
    optimizer = std::make_unique<AdamW>(*backend, model->layouts(), model->params(), AdamWConfig{});
    TrainerOptions t;
    t.schedule = LrSchedule{
        .lr = 1e-2, .min_lr = 0, .warmup_steps = 0, .total_steps = 10, .decay = Decay::kConstant};
    t.loss_scale = scale;
    t.dynamic_loss_scale = dynamic;
    t.scale_growth_interval = interval;
    trainer = std::make_unique<Trainer>(*backend, *model, *optimizer, t);
  }
  std::vector<float> weights() {
    std::vector<float> all;
    for (FlatGroup& g : model->params()) {
      Tensor wide = backend->cast(g.flat, DType::kF32, Category::kWorkspace, "w");
      all.insert(all.end(), wide.data<float>(), wide.data<float>() + wide.numel());
    }
    return all;
  }
};

// The scale only travels with the gradients: the norm, the clip and the
// update divide it out, so an fp32 run scaled by 1024 is the unscaled run
// up to rounding.
TEST(LossScale, AScaledStepUpdatesAsTheUnscaledOne) {
  ScaledTraining plain(DType::kF32, 1.0, false), scaled(DType::kF32, 1024.0, false);
  const Batch batch = testing::make_batch(23, 3);
  for (int64_t step = 0; step < 3; ++step) {
    const StepRecord a = plain.trainer->step(step, {batch});
    const StepRecord b = scaled.trainer->step(step, {batch});
    EXPECT_EQ(b.loss_scale, 1024.0);
    EXPECT_NEAR(b.loss, a.loss, 1e-6 * a.loss);
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-5 * a.grad_norm) << "the norm is unscaled";
  }
  const std::vector<float> a = plain.weights(), b = scaled.weights();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(b[i], a[i], 1e-5) << i;
}

// 2^24 times the loss gradient overflows fp16 (65504) at once: each such
// step is skipped, the weights stay, and the scale halves until the
// gradients fit; the skips are overflows, not failures.
TEST(LossScale, ADynamicScaleHalvesOnOverflowUntilTheGradientsFit) {
  ScaledTraining s(DType::kF16, 16777216.0, true);
  const Batch batch = testing::make_batch(23, 3);
  const std::vector<float> before = s.weights();
  double scale = 16777216.0;
  int64_t overflows = 0;
  StepRecord r;
  for (int64_t step = 0; step < 24; ++step) {
    r = s.trainer->step(step, {batch});
    EXPECT_EQ(r.loss_scale, scale) << step;
    EXPECT_TRUE(std::isfinite(r.loss)) << "the forward does not see the scale";
    if (!r.skipped) break;
    EXPECT_TRUE(s.trainer->overflowed());
    EXPECT_EQ(s.weights(), before) << "a skipped step changes no weight";
    scale /= 2;
    ++overflows;
    EXPECT_EQ(s.trainer->loss_scale(), scale);
  }
  EXPECT_FALSE(r.skipped) << "the scale came down to where fp16 holds the gradients";
  EXPECT_FALSE(s.trainer->overflowed());
  EXPECT_GT(overflows, 2);
  EXPECT_EQ(s.trainer->skipped_steps(), overflows);
  EXPECT_NE(s.weights(), before);
}

// GradScaler's growth: after `interval` updates in a row the scale doubles.
TEST(LossScale, ADynamicScaleDoublesAfterItsIntervalOfCleanSteps) {
  ScaledTraining s(DType::kF16, 256.0, true, 3);
  const Batch batch = testing::make_batch(23, 3);
  std::vector<double> scales;
  for (int64_t step = 0; step < 7; ++step) {
    const StepRecord r = s.trainer->step(step, {batch});
    ASSERT_FALSE(r.skipped) << step;
    scales.push_back(r.loss_scale);
  }
  EXPECT_EQ(scales, (std::vector<double>{256, 256, 256, 512, 512, 512, 1024}));
  EXPECT_EQ(s.trainer->scale_clean_steps(), 1);
  // A non-finite loss is the forward's failure, not an overflow: counted, not halved.
  Tensor& w = s.model->params()[1].flat;
  w.data<f16>()[0] = to_f16(std::nanf(""));
  const StepRecord r = s.trainer->step(7, {batch});
  EXPECT_TRUE(r.skipped);
  EXPECT_FALSE(s.trainer->overflowed());
  EXPECT_EQ(s.trainer->loss_scale(), 1024.0);
}

}  // namespace
}  // namespace headroom
