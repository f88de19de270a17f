// Batcher throughput and quality. Part 1 plans epochs of 10M documents from
// their lengths alone (what every rank does at each epoch start): documents
// and tokens planned per second, bins, fill of the token budget, padding, and
// the balance of dealing steps to 8 ranks by cost against round-robin. Part 2 builds micro-batches
// from a real HDF5 file (hyperslab reads + targets/positions): tokens per second.
//
//   ./build/bench/batcher_bench [documents (default 10000000)]
//
// Medians of 3 runs; the machine is noisy, so compare rows of one run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/markov.h"
#include "data/token_dataset.h"

using namespace headroom;

namespace {

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_of_3(const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < 3; ++i)
    t.push_back(seconds_of(f));
  std::sort(t.begin(), t.end());
  return t[1];
}

struct Row {
  const char* name;
  BatchOptions options;
};

// Mean rank tokens over the busiest rank's, summed over steps of `world`
// ranks x `accum` micro-batches: 1.0 = nobody waits at the reduction. Bins
// dealt by cost (the Batcher's rule) or round-robin in stream order (bin j of
// a step to rank j % world, the rule before it).
double balance_of(const EpochBins& bins, int world, int accum, bool by_cost) {
  const size_t per_step = static_cast<size_t>(world * accum);
  double busiest = 0, total = 0;
  std::vector<std::vector<int64_t>> round_robin(static_cast<size_t>(world));
  for (size_t j = 0; j < per_step; ++j)
    round_robin[j % static_cast<size_t>(world)].push_back(static_cast<int64_t>(j));
  for (size_t s = 0; s + per_step <= bins.bin_cost.size(); s += per_step) {
    std::span<const int64_t> costs(bins.bin_cost.data() + s, per_step);
    int64_t most = 0;
    for (const std::vector<int64_t>& rank : by_cost ? deal_by_cost(costs, world) : round_robin) {
      int64_t load = 0;
      for (int64_t j : rank)
        load += costs[static_cast<size_t>(j)];
      most = std::max(most, load);
      total += static_cast<double>(load);
    }
    busiest += static_cast<double>(most);
  }
  return total / world / busiest;
}

void plan_table(int64_t documents, const char* title, const LengthSpec& spec, int64_t budget) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> length(static_cast<size_t>(documents));
  for (int64_t& l : length)
    l = spec.draw(rng);
  const double tokens = static_cast<double>(std::accumulate(length.begin(), length.end(), 0.0));
  std::vector<int64_t> kept(length.size());
  std::iota(kept.begin(), kept.end(), 0);

  auto packed = [budget](BatchOptions::Packing p, int64_t window) {
    BatchOptions o;
    o.packing = p;
    o.packing_window = window;
    o.max_tokens_per_micro_batch = budget;
    return o;
  };
  BatchOptions padded;
  padded.mode = BatchOptions::Mode::kPadded;
  padded.micro_batch_size = 8;
  const std::vector<Row> rows = {
      {"next_fit", packed(BatchOptions::Packing::kNextFit, 0)},
      {"first_fit, window 4096", packed(BatchOptions::Packing::kFirstFit, 4096)},
      {"first_fit, epoch", packed(BatchOptions::Packing::kFirstFit, 0)},
      {"first_fit_decreasing, window 4096",
       packed(BatchOptions::Packing::kFirstFitDecreasing, 4096)},
      {"first_fit_decreasing, epoch", packed(BatchOptions::Packing::kFirstFitDecreasing, 0)},
      {"padded, 8 rows", padded},
  };
  std::printf("\n%s: %lld documents, %.3g tokens, budget %lld tokens\n\n", title,
              static_cast<long long>(documents), tokens, static_cast<long long>(budget));
  std::printf(
      "| batching | plan s (median of 3) | Mdocs/s | Gtokens/s | bins | fill | padding | balance "
      "by cost | balance round-robin |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    EpochBins bins;
    const double s = median_of_3(
        [&] { bins = make_bins(visiting_order(kept, row.options, 0), length, row.options); });
    // Fill: tokens over the room the bins had (the budget, or an oversize
    // document's own length).
    double cost = 0, room = 0;
    for (int64_t c : bins.bin_cost) {
      cost += static_cast<double>(c);
      room += static_cast<double>(std::max(c, budget));
    }
    const bool is_padded = row.options.mode == BatchOptions::Mode::kPadded;
    char fill[32] = "-";
    if (!is_padded) std::snprintf(fill, sizeof fill, "%.1f%%", 100.0 * tokens / room);
    std::printf("| %s | %.2f | %.2f | %.2f | %lld | %s | %.1f%% | %.1f%% | %.1f%% |\n", row.name, s,
                static_cast<double>(documents) / s / 1e6, tokens / s / 1e9,
                static_cast<long long>(bins.num_bins()), fill, 100.0 * (cost - tokens) / cost,
                100.0 * balance_of(bins, 8, 4, true), 100.0 * balance_of(bins, 8, 4, false));
  }
}

void build_table() {
  const std::string path =
      (std::filesystem::temp_directory_path() / "headroom-batcher-bench.h5").string();
  MarkovSpec spec;
  spec.vocab_size = 32000;
  const int64_t documents = 20000;
  write_markov_corpus(path, spec, LengthSpec::lognormal(600, 1.0, 16, 16384), documents, 1);
  const TokenDataset dataset = TokenDataset::open(path, spec.vocab_size);
  std::printf("\nbuilding micro-batches from %s: %lld documents, %lld tokens\n\n", path.c_str(),
              static_cast<long long>(documents), static_cast<long long>(dataset.num_tokens()));
  std::printf("| batching | epoch s (median of 3) | Mtokens/s |\n|---|---|---|\n");
  BatchOptions packed;
  packed.max_tokens_per_micro_batch = 16384;
  BatchOptions padded;
  padded.mode = BatchOptions::Mode::kPadded;
  padded.micro_batch_size = 8;
  for (const Row& row : {Row{"packed first_fit, 16384", packed}, Row{"padded, 8 rows", padded}}) {
    int64_t built = 0;
    const double s = median_of_3([&] {
      Batcher batcher(dataset, row.options);
      built = 0;
      while (batcher.cursor().epoch == 0)
        for (const Batch& b : batcher.next_step())
          built += b.size();
    });
    std::printf("| %s | %.2f | %.1f |\n", row.name, s, static_cast<double>(built) / s / 1e6);
  }
  std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t documents = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
  plan_table(documents, "seed 001's mix (3:1 of 6-8k and 22-26k tokens)",
             LengthSpec::histogram({{6000, 8000, 3}, {22000, 26000, 1}}), 16384);
  plan_table(documents, "lognormal lengths (median 600, sigma 1, 16..16384)",
             LengthSpec::lognormal(600, 1.0, 16, 16384), 4096);
  build_table();
  return 0;
}
