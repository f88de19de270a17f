#include <gtest/gtest.h>

#include <cmath>

#include "train/lr_schedule.h"

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
