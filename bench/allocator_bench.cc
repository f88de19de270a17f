// Allocator throughput: how many allocate+free pairs per second each policy
// sustains on the meta source (no memory touched, so this is the allocator's
// own bookkeeping), for a training-like mix of sizes. Planning an 8B model
// makes a few hundred thousand of these, so this bounds plan time.
//
//   ./build/bench/allocator_bench [rounds]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "memory/allocator.h"

using namespace headroom;

namespace {

double run(AllocatorPolicy policy, int rounds, const std::vector<uint64_t>& sizes) {
  Allocator allocator(make_virtual_source(), AllocatorOptions{policy, 0});
  std::vector<Allocation> live;
  live.reserve(sizes.size());
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    // A step: allocate everything (activations), then free in reverse.
    for (uint64_t s : sizes)
      live.push_back(allocator.allocate(s, Category::kActivation, "act"));
    while (!live.empty()) {
      allocator.free(live.back());
      live.pop_back();
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(rounds) * static_cast<double>(sizes.size()) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  std::mt19937_64 rng(42);
  std::vector<uint64_t> sizes(1000);
  // Log-uniform between 512 B and 1 GiB: norms' vectors up to logits chunks.
  std::uniform_real_distribution<double> log_size(9.0, 30.0);
  for (uint64_t& s : sizes)
    s = static_cast<uint64_t>(std::exp2(log_size(rng)));

  std::printf("| policy  | rounds | allocs/round | median allocs+frees/s (5 runs) |\n");
  std::printf("|---------|--------|--------------|--------------------------------|\n");
  for (AllocatorPolicy policy : {AllocatorPolicy::kCaching, AllocatorPolicy::kExact}) {
    std::vector<double> rates;
    for (int i = 0; i < 5; ++i)
      rates.push_back(run(policy, rounds, sizes));
    std::sort(rates.begin(), rates.end());
    std::printf("| %-7s | %6d | %12zu | %30.3g |\n",
                policy == AllocatorPolicy::kCaching ? "caching" : "exact", rounds, sizes.size(),
                rates[2]);
  }
  return 0;
}
