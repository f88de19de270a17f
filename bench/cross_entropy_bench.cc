// cpu cross-entropy throughput through the backend seam: one loss chunk of
// logits [rows, vocab] against random targets, forward (row max, exp-sum,
// lse, loss) and backward (dlogits in place), fp32 and bf16, at a Qwen
// vocabulary and at the small-50m preset's. Prints ns per logit (medians of
// several runs, the current OMP_NUM_THREADS) and the GB/s that is as a read
// of the logits, to set against the gemm that made the chunk
// (build/bench/gemm_bench).
//
//   ./build/bench/cross_entropy_bench [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/backend.h"

using namespace headroom;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  Allocator allocator(make_host_source(), AllocatorOptions{});
  std::unique_ptr<Backend> cpu = make_cpu_backend(allocator);

  std::printf("| dtype | rows x vocab | forward ns/logit | backward ns/logit | forward GB/s |\n");
  std::printf("|---|---|---|---|---|\n");
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{256, 151936}, {2048, 8192}}) {
      Tensor logits = cpu->empty({rows, vocab}, dtype, Category::kActivation, "logits");
      Tensor saved = cpu->empty({rows, vocab}, dtype, Category::kActivation, "saved");
      Tensor targets = cpu->empty({rows}, DType::kI32, Category::kActivation, "targets");
      Tensor lse = cpu->empty({rows}, DType::kF32, Category::kActivation, "lse");
      Tensor loss = cpu->empty({1}, DType::kF32, Category::kActivation, "loss");
      cpu->fill_uniform(saved, 3, -8, 8);
      std::vector<int32_t> target(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i)
        target[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % vocab);
      cpu->copy_from_host(target.data(), targets);
      std::vector<double> forward, backward;
      for (int r = 0; r < repeats + 1; ++r) {  // the first is a warm-up
        cpu->copy(saved, logits);
        cpu->fill(loss, 0.0f);
        auto t0 = std::chrono::steady_clock::now();
        cpu->cross_entropy_forward(logits, targets, lse, loss);
        auto t1 = std::chrono::steady_clock::now();
        cpu->cross_entropy_backward(logits, targets, lse, 1.0f / static_cast<float>(rows));
        auto t2 = std::chrono::steady_clock::now();
        if (r == 0) continue;
        forward.push_back(std::chrono::duration<double>(t1 - t0).count());
        backward.push_back(std::chrono::duration<double>(t2 - t1).count());
      }
      const double logits_count = static_cast<double>(rows) * static_cast<double>(vocab);
      const double f = median(forward), b = median(backward);
      std::printf("| %s | %lld x %lld | %.2f | %.2f | %.1f |\n",
                  std::string(name_of(dtype)).c_str(), static_cast<long long>(rows),
                  static_cast<long long>(vocab), f * 1e9 / logits_count, b * 1e9 / logits_count,
                  logits_count * static_cast<double>(size_of(dtype)) / f / 1e9);
    }
  }
  return 0;
}
