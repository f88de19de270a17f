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

// fp16 against its definition: every one of the 65536 patterns converts to
// its value and back; the midpoint between two neighbours (exact in fp32)
// goes to the even one; 65520 is where inf begins; subnormals round too.
TEST(Fp16, EveryPatternRoundTripsAndMidpointsGoToEven) {
  auto value_of = [](uint16_t h) {  // from the format's definition, in double
    const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return sign ? -magnitude : magnitude;
  };
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const int exponent = (bits >> 10) & 0x1f;
    if (exponent == 31) {
      const float f = to_float(f16{bits});
      EXPECT_EQ(std::isnan(f), (bits & 0x3ff) != 0) << h;
      EXPECT_EQ(std::isnan(to_float(to_f16(f))), std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(to_float(f16{bits})), value_of(bits)) << h;
    ASSERT_EQ(to_f16(to_float(f16{bits})).bits, bits) << h;
    // Up to the next positive pattern (of the same sign): the midpoint.
    if ((bits & 0x7fff) == 0x7bff) continue;  // 65504: the next is inf
    const auto next = static_cast<uint16_t>(bits + 1);
    const double mid = (value_of(bits) + value_of(next)) / 2;
    const uint16_t even = (bits & 1) ? next : bits;
    ASSERT_EQ(to_f16(static_cast<float>(mid)).bits, even) << h;
    // Just short of the midpoint (towards zero): the smaller magnitude.
    ASSERT_EQ(to_f16(std::nextafter(static_cast<float>(mid), 0.0f)).bits, bits) << h;
  }
  EXPECT_EQ(to_f16(65519.99f).bits, 0x7bff);
  EXPECT_EQ(to_f16(65520.0f).bits, 0x7c00) << "halfway past 65504 rounds to inf";
  EXPECT_EQ(to_f16(-1e6f).bits, 0xfc00);
  EXPECT_EQ(to_f16(1e-9f).bits, 0x0000);
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -24)).bits, 0x0001);
}

}  // namespace
}  // namespace headroom
