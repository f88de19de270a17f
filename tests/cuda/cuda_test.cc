// The cuda segment source and kernels on a real GPU, checked against the
// host-side definitions (tensor/dtype.h rounding). Skipped without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels.h"
#include "memory/allocator.h"
#include "memory/postmortem.h"
#include "tensor/dtype.h"

namespace headroom {
namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no CUDA device visible";
    }
  }
};

TEST_F(Cuda, DriverSeesWhatTheAllocatorReserved) {
  uint64_t free_before = 0, total = 0;
  ASSERT_EQ(cuda::device_memory(&free_before, &total), cudaSuccess);
  {
    Allocator allocator(make_cuda_source(), AllocatorOptions{});
    Allocation a = allocator.allocate(uint64_t{1} << 30, Category::kParam, "one.gib");
    uint64_t free_after = 0;
    ASSERT_EQ(cuda::device_memory(&free_after, &total), cudaSuccess);
    const double seen = static_cast<double>(free_before - free_after);
    EXPECT_NEAR(seen, static_cast<double>(allocator.reserved()), 64.0 * (1 << 20))
        << "cudaMemGetInfo agrees with reserved within 64 MiB (driver granularity)";
    allocator.free(a);
  }
}

TEST_F(Cuda, ARealOutOfMemoryBecomesAPostmortem) {
  uint64_t free_bytes = 0, total = 0;
  ASSERT_EQ(cuda::device_memory(&free_bytes, &total), cudaSuccess);
  Allocator allocator(make_cuda_source(), AllocatorOptions{});
  try {
    allocator.allocate(total * 2, Category::kLogits, "too.big");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& oom) {
    EXPECT_FALSE(oom.postmortem().capacity_limited);
    EXPECT_EQ(oom.postmortem().source, "cuda");
    // The driver's figures ride along: the whole device, and what was free.
    EXPECT_EQ(oom.postmortem().device_total, total);
    EXPECT_GT(oom.postmortem().device_free, 0u);
    EXPECT_LE(oom.postmortem().device_free, total);
    EXPECT_NE(format_postmortem(oom.postmortem()).find("device (cudaMemGetInfo): "),
              std::string::npos);
  }
  Allocation ok = allocator.allocate(1 << 20, Category::kLogits, "fine.after");
  EXPECT_NE(ok.address, nullptr) << "the failed cudaMalloc left no sticky error";
  allocator.free(ok);
}

TEST_F(Cuda, KernelsMatchTheHostDefinitions) {
  const int64_t n = 1000003;  // not a multiple of the block size
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = std::sin(static_cast<float>(i)) * 3.0f;
    b[i] = std::cos(static_cast<float>(i) * 0.5f);
  }
  Allocator allocator(make_cuda_source(), AllocatorOptions{});
  Allocation da = allocator.allocate(n * 4, Category::kActivation, "a");
  Allocation db = allocator.allocate(n * 4, Category::kActivation, "b");
  Allocation dh = allocator.allocate(n * 2, Category::kActivation, "h");
  float* pa = static_cast<float*>(da.address);
  float* pb = static_cast<float*>(db.address);
  uint16_t* ph = static_cast<uint16_t*>(dh.address);
  ASSERT_EQ(cudaMemcpy(pa, a.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(pb, b.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);

  ASSERT_EQ(cuda::add_f32(pa, pb, pa, n, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::cast_f32_to_bf16(pa, ph, n, nullptr), cudaSuccess);
  std::vector<uint16_t> h(n);
  ASSERT_EQ(cudaMemcpy(h.data(), ph, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(h[i], to_bf16(a[i] + b[i]).bits) << "element " << i;

  ASSERT_EQ(cuda::fill_f32(pb, n, 0.25f, nullptr), cudaSuccess);
  std::vector<float> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), pb, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < n; i += 9973)
    ASSERT_EQ(back[i], 0.25f);
  allocator.free(da), allocator.free(db), allocator.free(dh);
}

}  // namespace
}  // namespace headroom
