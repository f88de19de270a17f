// NF4 (backend/common/nf4.h) against its definition: the 16 values are the
// normal quantiles QLoRA defines, a code is the nearest value, the storage
// is bitsandbytes' size; and the cpu kernels round-trip, do not depend on
// the thread count, and meta makes their allocations. The ops' values on
// random inputs are the harness's (tests/backend/op_cases_nf4.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/common/nf4.h"
#include "ops/nf4_reference.h"
#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

TEST(Nf4, ValuesAreTheNormalQuantilesOfTheDefinition) {
  const std::vector<double> reference = reference_nf4_values();
  ASSERT_EQ(reference.size(), 16u);
  for (size_t c = 0; c < 16; ++c)
    EXPECT_NEAR(nf4_values()[c], reference[c], 2e-7) << "code " << c;
  EXPECT_EQ(nf4_values()[0], -1.0f);
  EXPECT_EQ(nf4_values()[7], 0.0f) << "an exact zero";
  EXPECT_EQ(nf4_values()[15], 1.0f);
}

TEST(Nf4, ACodeIsTheNearestValueAndAMidpointGoesLow) {
  const std::vector<double> reference = reference_nf4_values();
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = uniform(rng);
    ASSERT_EQ(nf4_code(x), reference_nf4_code(reference, x)) << x;
  }
  for (uint8_t c = 0; c < 16; ++c)
    EXPECT_EQ(nf4_code(nf4_values()[c]), c) << "each value is its own code";
  // bitsandbytes' pivots are the fp32 midpoints; exactly on one, the lower code.
  for (uint8_t c = 0; c + 1 < 16; ++c) {
    const float mid = (nf4_values()[c] + nf4_values()[c + 1]) / 2;
    EXPECT_LE(std::abs(nf4_code(mid) - c), 1) << "midpoint " << static_cast<int>(c);
  }
  EXPECT_EQ(nf4_code(std::nanf("")), 0) << "NaN (an all-zero block) takes code 0, as bnb's tree";
  EXPECT_EQ(nf4_code(-5.0f), 0);
  EXPECT_EQ(nf4_code(5.0f), 15);
}

TEST(Nf4, StorageIsBitsandbytes) {
  // A (4096, 4096) q_proj: 8 MiB of codes, 262144 fp32 absmax.
  const Nf4Sizes plain = nf4_sizes(4096 * 4096, false);
  EXPECT_EQ(plain.code_bytes, 8388608);
  EXPECT_EQ(plain.blocks, 262144);
  EXPECT_EQ(plain.blocks2, 0);
  EXPECT_EQ(plain.bytes, 8388608 + 4 * 262144);
  // Double quantization: a byte per absmax, an fp32 per 256 of them, the offset.
  const Nf4Sizes dq = nf4_sizes(4096 * 4096, true);
  EXPECT_EQ(dq.bytes, 8388608 + 262144 + 4 * 1024 + 4);
  // Odd counts and partial blocks round up.
  EXPECT_EQ(nf4_sizes(65, true).code_bytes, 33);
  EXPECT_EQ(nf4_sizes(65, true).blocks, 2);
  EXPECT_EQ(nf4_sizes(65, true).blocks2, 1);
}

// Quantizing the dequantized weight gives the same codes back, and the
// dequantized values are within half a code step of the originals.
TEST(Nf4, ARoundTripIsStableAndCloseToTheWeight) {
  for (bool dq : {false, true}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      BackendUnderTest cpu(kCpu);
      Backend& be = *cpu.backend;
      std::vector<float> values = random_values(96 * 130, 5);
      Tensor w = make(be, {96, 130}, dtype, values, "w");
      Nf4Weight q = be.nf4_empty({96, 130}, dq, Category::kParam, "q");
      be.nf4_quantize(w, q);
      Tensor back = be.nf4_dequantize(q, dtype, Category::kWorkspace, "back");
      const std::vector<double> restored = download(back);
      const std::vector<double> original = download(w);
      for (size_t i = 0; i < original.size(); ++i) {
        // The largest gap between neighbouring values is 0.3038 (-1 to
        // -0.6962): half of it times the block's absmax (<= 1 here), plus
        // bf16's rounding of the output and double quantization's own error.
        ASSERT_NEAR(restored[i], original[i],
                    0.152 + (dtype == DType::kBF16 ? 1.0 / 256 : 0.0) + (dq ? 0.01 : 0.0))
            << i;
      }
      Nf4Weight again = be.nf4_empty({96, 130}, dq, Category::kParam, "again");
      be.nf4_quantize(back, again);
      EXPECT_EQ(bytes_of(again.codes), bytes_of(q.codes)) << "dq " << dq << " " << name_of(dtype);
    }
  }
}

TEST(Nf4, ResultsDoNotDependOnTheThreadCount) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  Tensor w = make(be, {512, 200}, DType::kBF16, random_values(512 * 200, 9), "w");
  Nf4Weight q = be.nf4_empty({512, 200}, true, Category::kParam, "q");
  Tensor out = be.empty({512, 200}, DType::kBF16, Category::kWorkspace, "out");
  const auto bytes = bytes_per_thread_count([] {},
                                            [&] {
                                              be.nf4_quantize(w, q);
                                              Tensor back = be.nf4_dequantize(
                                                  q, DType::kBF16, Category::kWorkspace, "back");
                                              be.copy(back, out);
                                            },
                                            out);
  for (size_t i = 1; i < bytes.size(); ++i)
    EXPECT_EQ(bytes[i], bytes[0]) << "thread count " << i;
}

TEST(Nf4, MetaMakesTheCpuAllocations) {
  for (bool dq : {false, true}) {
    expect_same_events([dq](Backend& be) {
      Tensor w = be.empty({70, 64}, DType::kBF16, Category::kWorkspace, "w");
      if (be.kind() == BackendKind::kCpu) be.fill_uniform(w, 1, -1, 1);
      Nf4Weight q = be.nf4_empty({70, 64}, dq, Category::kParam, "q");
      be.nf4_quantize(w, q);
      Tensor back = be.nf4_dequantize(q, DType::kBF16, Category::kWorkspace, "back");
    });
  }
}

}  // namespace
}  // namespace headroom::backend_test
