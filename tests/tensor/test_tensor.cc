#include <gtest/gtest.h>

#include <cmath>

#include "tensor/tensor.h"
#include "util/error.h"

namespace headroom {
namespace {

TEST(Tensor, StorageReturnsItselfWhenTheLastViewGoes) {
  Allocator allocator(make_host_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
  {
    Tensor t = Tensor::empty(allocator, BackendKind::kCpu, {4, 8}, DType::kF32,
                             Category::kActivation, "block.0.x");
    EXPECT_EQ(allocator.allocated(), 4u * 8 * 4);
    EXPECT_EQ(allocator.live(Category::kActivation), 128u);
    Tensor v = t.view({32});
    Tensor r = t.rows(1, 3);
    t = Tensor();
    EXPECT_EQ(allocator.allocated(), 128u) << "views keep the storage alive";
    EXPECT_EQ(r.shape(), (Shape{2, 8}));
    EXPECT_EQ(static_cast<char*>(r.raw()) - static_cast<char*>(v.raw()), 8 * 4);
  }
  EXPECT_EQ(allocator.allocated(), 0u);
  EXPECT_EQ(allocator.num_live_blocks(), 0u);
}

TEST(Tensor, DescribesItselfAndChecksTypedAccess) {
  Allocator allocator(make_host_source(), AllocatorOptions{});
  Tensor t = Tensor::empty(allocator, BackendKind::kCpu, {1024, 3}, DType::kBF16, Category::kLogits,
                           "loss.chunk.0.logits");
  EXPECT_EQ(t.describe(), "bf16 [1024, 3]");
  EXPECT_EQ(t.nbytes(), 1024u * 3 * 2);
  EXPECT_NE(t.data<bf16>(), nullptr);
  EXPECT_THROW(t.data<float>(), InternalError);
  EXPECT_THROW(t.view({5}), InternalError);
  EXPECT_THROW(t.rows(2, 1), InternalError);
}

TEST(Tensor, MetaTensorsHaveAddressesButNoData) {
  Allocator allocator(make_virtual_source(), AllocatorOptions{});
  Tensor t = Tensor::empty(allocator, BackendKind::kMeta, {1 << 20, 1 << 10}, DType::kF32,
                           Category::kParam, "embed");  // 4 GiB, touches nothing
  EXPECT_EQ(allocator.allocated(), 4ull << 30);
  EXPECT_NE(t.raw(), nullptr);
  EXPECT_THROW(t.data<float>(), InternalError);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(to_bf16(1.00390625f).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): goes up.
  EXPECT_EQ(to_bf16(1.01171875f).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::nanf("")))));
  EXPECT_EQ(to_float(to_bf16(-2.5f)), -2.5f);
}

}  // namespace
}  // namespace headroom
