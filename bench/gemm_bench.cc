// cpu GEMM throughput through the backend seam (oneDNN matmul), fp32 and
// bf16 inputs with fp32 accumulation, C = A @ B^T as in a linear layer's
// forward. Prints GFLOP/s medians of several runs and the workspace the
// backend accounted for each shape (bf16 on a cpu without native bf16
// matmul widens its inputs to fp32 workspace copies).
//
//   ./build/bench/gemm_bench [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/backend.h"

using namespace headroom;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  Allocator allocator(make_host_source(), AllocatorOptions{});
  std::unique_ptr<Backend> cpu = make_cpu_backend(allocator);

  std::printf(
      "| dtype in -> out | M x N x K            | median GFLOP/s | min GFLOP/s | workspace peak "
      "|\n");
  std::printf(
      "|-----------------|----------------------|----------------|-------------|----------------|"
      "\n");
  for (DType in : {DType::kF32, DType::kBF16}) {
    for (int64_t n : {512, 1024, 2048}) {
      Tensor a = cpu->empty({n, n}, in, Category::kActivation, "a");
      Tensor b = cpu->empty({n, n}, in, Category::kParam, "b");
      Tensor c = cpu->empty({n, n}, DType::kF32, Category::kActivation, "c");
      cpu->fill_uniform(a, 1, -1, 1);
      cpu->fill_uniform(b, 2, -1, 1);
      cpu->gemm(a, false, b, true, c, 1.0f, 0.0f);  // warm-up: builds and caches the primitive
      allocator.reset_peaks();
      std::vector<double> gflops;
      for (int r = 0; r < repeats; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        cpu->gemm(a, false, b, true, c, 1.0f, 0.0f);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        gflops.push_back(2.0 * static_cast<double>(n) * n * n / s / 1e9);
      }
      std::sort(gflops.begin(), gflops.end());
      std::printf("| %-4s -> fp32    | %5lld x %5lld x %5lld | %14.1f | %11.1f | %11.1f MiB |\n",
                  std::string(name_of(in)).c_str(), static_cast<long long>(n),
                  static_cast<long long>(n), static_cast<long long>(n), gflops[gflops.size() / 2],
                  gflops.front(),
                  static_cast<double>(allocator.peak(Category::kWorkspace)) / (1 << 20));
    }
  }
  return 0;
}
