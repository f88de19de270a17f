// Block-sparse flash attention forward on cuda: the SIMT kernel against the
// tensor-core one (cuda/kernels_flash_attention.h), bf16, head_dim 128,
// 32 query heads over 8 kv heads, for the causal, sliding-window (1024) and
// document (packed documents of 512 to 4096 tokens, packed_documents) masks at T = 4096, 8192
// and 16384. TFLOP/s count only the visible (query, key) pairs, 4 D FLOPs
// each (Q K^T and P V), as FlashAttention's benchmarks do for causal.
// Median of 10 timed calls (CUDA events) after 2 untimed. Prints a Markdown
// table; the same shapes' PyTorch figures come from
// bench/torch_attention_bench.py in the device check.
//
//   build/bench/flash_attention_bench [repeats]   (needs a GPU)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/common/attention_mask.h"
#include "kernels_flash_attention.h"

namespace {

using namespace headroom;

#define BENCH_CUDA_CHECK(call)                                           \
  do {                                                                   \
    const cudaError_t err_ = (call);                                     \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(err_));                            \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

struct Case {
  std::string mask;
  AttentionMask rule;
  std::vector<int32_t> cu;  // document offsets
};

// Packed documents of 512 to 4096 tokens filling t tokens: a fixed cycle of
// lengths, which bench/torch_attention_bench.py repeats.
std::vector<int32_t> packed_documents(int64_t t) {
  constexpr int32_t kLengths[] = {512, 3072, 1024, 4096, 768, 2048, 1536, 2560};
  std::vector<int32_t> cu = {0};
  for (size_t d = 0; cu.back() < t; ++d)
    cu.push_back(static_cast<int32_t>(std::min<int64_t>(t, cu.back() + kLengths[d % 8])));
  return cu;
}

// The (query, key) pairs the mask lets through, over all documents.
double visible_pairs(const Case& c) {
  double pairs = 0;
  for (size_t d = 0; d + 1 < c.cu.size(); ++d)
    for (int64_t i = c.cu[d]; i < c.cu[d + 1]; ++i) {
      const KeyInterval keys = visible_keys_in_document(c.rule, c.cu[d], c.cu[d + 1], i);
      pairs += static_cast<double>(keys.hi - keys.lo);
    }
  return pairs;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  constexpr int64_t kHeads = 32, kKvHeads = 8, kD = 128;
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s; bf16, head_dim %lld, %lld heads over %lld kv heads, median of %d\n\n",
              prop.name, static_cast<long long>(kD), static_cast<long long>(kHeads),
              static_cast<long long>(kKvHeads), repeats);
  std::printf(
      "| mask | T | visible pairs | SIMT ms | SIMT TFLOP/s | tensor cores ms | "
      "tensor cores TFLOP/s | tensor / SIMT | largest |out| difference |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t t : {4096, 8192, 16384}) {
    std::vector<Case> cases;
    AttentionMask causal;
    causal.kind = AttentionMaskKind::kCausal;
    cases.push_back({"causal", causal, {0, static_cast<int32_t>(t)}});
    AttentionMask window;
    window.kind = AttentionMaskKind::kSlidingWindow;
    window.window = 1024;
    cases.push_back({"sliding_window 1024", window, {0, static_cast<int32_t>(t)}});
    AttentionMask document;
    document.kind = AttentionMaskKind::kDocument;
    cases.push_back({"document", document, packed_documents(t)});

    const size_t q_elems = static_cast<size_t>(t * kHeads * kD);
    const size_t kv_elems = static_cast<size_t>(t * kKvHeads * kD);
    std::vector<uint16_t> host(q_elems);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (uint16_t& x : host) {
      const float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      x = static_cast<uint16_t>(bits >> 16);  // truncated to bf16: any bf16 will do
    }
    void *q, *k, *v, *out_simt, *out_mma;
    float* lse;
    BENCH_CUDA_CHECK(cudaMalloc(&q, q_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&k, kv_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&v, kv_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&out_simt, q_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&out_mma, q_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&lse, static_cast<size_t>(kHeads * t) * 4));
    BENCH_CUDA_CHECK(cudaMemcpy(q, host.data(), q_elems * 2, cudaMemcpyHostToDevice));
    BENCH_CUDA_CHECK(cudaMemcpy(k, host.data(), kv_elems * 2, cudaMemcpyHostToDevice));
    BENCH_CUDA_CHECK(
        cudaMemcpy(v, host.data() + kv_elems / 2, kv_elems * 2, cudaMemcpyHostToDevice));
    cudaEvent_t start, stop;
    BENCH_CUDA_CHECK(cudaEventCreate(&start));
    BENCH_CUDA_CHECK(cudaEventCreate(&stop));

    for (const Case& c : cases) {
      cuda::FlashDims dims;
      dims.tokens = t;
      dims.heads = kHeads;
      dims.kv_heads = kKvHeads;
      dims.head_dim = kD;
      dims.scale = 1.0f / std::sqrt(static_cast<float>(kD));
      dims.mask = c.rule;
      const int64_t documents = static_cast<int64_t>(c.cu.size()) - 1;
      auto time_ms = [&](bool tensor_cores, void* out) {
        auto call = [&] {
          return tensor_cores
                     ? cuda::flash_attention_forward_mma(q, k, v, c.cu.data(), documents, dims,
                                                         cuda::FloatType::kBF16, out, lse, nullptr)
                     : cuda::flash_attention_forward_simt(q, k, v, c.cu.data(), documents, dims,
                                                          cuda::FloatType::kBF16, out, lse,
                                                          nullptr);
        };
        for (int i = 0; i < 2; ++i)
          BENCH_CUDA_CHECK(call());
        std::vector<float> ms;
        for (int i = 0; i < repeats; ++i) {
          BENCH_CUDA_CHECK(cudaEventRecord(start));
          BENCH_CUDA_CHECK(call());
          BENCH_CUDA_CHECK(cudaEventRecord(stop));
          BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
          float elapsed = 0;
          BENCH_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
          ms.push_back(elapsed);
        }
        std::sort(ms.begin(), ms.end());
        return static_cast<double>(ms[ms.size() / 2]);
      };
      const double simt = time_ms(false, out_simt), mma = time_ms(true, out_mma);
      // The two outputs side by side: the tensor cores round P to bf16.
      std::vector<uint16_t> a(q_elems), b(q_elems);
      BENCH_CUDA_CHECK(cudaMemcpy(a.data(), out_simt, q_elems * 2, cudaMemcpyDeviceToHost));
      BENCH_CUDA_CHECK(cudaMemcpy(b.data(), out_mma, q_elems * 2, cudaMemcpyDeviceToHost));
      double largest = 0;
      for (size_t i = 0; i < q_elems; ++i) {
        auto widen = [](uint16_t x) {
          const uint32_t bits = static_cast<uint32_t>(x) << 16;
          float f;
          std::memcpy(&f, &bits, 4);
          return static_cast<double>(f);
        };
        largest = std::max(largest, std::abs(widen(a[i]) - widen(b[i])));
      }
      const double pairs = visible_pairs(c);
      const double flops = 4.0 * kD * pairs * kHeads;
      std::printf("| %s | %lld | %.3g | %.3f | %.1f | %.3f | %.1f | %.2f | %.3g |\n",
                  c.mask.c_str(), static_cast<long long>(t), pairs, simt, flops / simt / 1e9, mma,
                  flops / mma / 1e9, simt / mma, largest);
    }
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out_simt), cudaFree(out_mma), cudaFree(lse);
    cudaEventDestroy(start), cudaEventDestroy(stop);
  }
  return 0;
}
