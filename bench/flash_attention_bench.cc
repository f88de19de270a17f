// Block-sparse flash attention on cuda, forward and backward: the SIMT
// kernels against the tensor-core ones (cuda/kernels_flash_attention.h), bf16, head_dim 128,
// 32 query heads over 8 kv heads, for the causal, sliding-window (1024) and
// document (packed documents of 512 to 4096 tokens, packed_documents) masks at T = 4096, 8192
// and 16384. TFLOP/s count only the visible (query, key) pairs, 4 D FLOPs
// each (Q K^T and P V), as FlashAttention's benchmarks do for causal; the
// backward (delta, then dq and dk/dv) 10 D FLOPs each (five products), 2.5x
// the forward, as theirs do.
// Median of 10 timed calls (CUDA events) after 2 untimed. Prints a Markdown
// table per pass; the same shapes' PyTorch figures come from
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

// Median milliseconds of `repeats` calls of `call` after 2 untimed.
template <typename Call>
double median_ms(Call call, int repeats, cudaEvent_t start, cudaEvent_t stop) {
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
}

// The largest |a - b| of two bf16 device buffers of n elements.
double largest_difference(const void* a, const void* b, size_t n) {
  std::vector<uint16_t> x(n), y(n);
  BENCH_CUDA_CHECK(cudaMemcpy(x.data(), a, n * 2, cudaMemcpyDeviceToHost));
  BENCH_CUDA_CHECK(cudaMemcpy(y.data(), b, n * 2, cudaMemcpyDeviceToHost));
  auto widen = [](uint16_t v) {
    const uint32_t bits = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return static_cast<double>(f);
  };
  double largest = 0;
  for (size_t i = 0; i < n; ++i)
    largest = std::max(largest, std::abs(widen(x[i]) - widen(y[i])));
  return largest;
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
  std::vector<std::string> backward_rows;
  std::printf(
      "forward\n\n| mask | T | visible pairs | SIMT ms | SIMT TFLOP/s | tensor cores ms | "
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
    void *q, *k, *v, *out_simt, *out_mma, *d_out;
    void *dq[2], *dk[2], *dv[2];  // SIMT, tensor cores
    float *lse, *delta;
    BENCH_CUDA_CHECK(cudaMalloc(&q, q_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&k, kv_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&v, kv_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&out_simt, q_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&out_mma, q_elems * 2));
    BENCH_CUDA_CHECK(cudaMalloc(&lse, static_cast<size_t>(kHeads * t) * 4));
    BENCH_CUDA_CHECK(cudaMalloc(&delta, static_cast<size_t>(kHeads * t) * 4));
    BENCH_CUDA_CHECK(cudaMalloc(&d_out, q_elems * 2));
    for (int i = 0; i < 2; ++i) {
      BENCH_CUDA_CHECK(cudaMalloc(&dq[i], q_elems * 2));
      BENCH_CUDA_CHECK(cudaMalloc(&dk[i], kv_elems * 2));
      BENCH_CUDA_CHECK(cudaMalloc(&dv[i], kv_elems * 2));
    }
    BENCH_CUDA_CHECK(cudaMemcpy(d_out, host.data(), q_elems * 2, cudaMemcpyHostToDevice));
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
      auto forward = [&](bool tensor_cores, void* out) {
        return [&, tensor_cores, out] {
          return tensor_cores
                     ? cuda::flash_attention_forward_mma(q, k, v, c.cu.data(), documents, dims,
                                                         cuda::FloatType::kBF16, out, lse, nullptr)
                     : cuda::flash_attention_forward_simt(q, k, v, c.cu.data(), documents, dims,
                                                          cuda::FloatType::kBF16, out, lse,
                                                          nullptr);
        };
      };
      const double simt = median_ms(forward(false, out_simt), repeats, start, stop);
      const double mma = median_ms(forward(true, out_mma), repeats, start, stop);
      // The two outputs side by side: the tensor cores round P to bf16.
      const double largest = largest_difference(out_simt, out_mma, q_elems);
      // Backward from the tensor cores' out and lse (the last forward run).
      auto backward = [&](int i) {
        return [&, i] {
          const cudaError_t e = cuda::flash_attention_delta(d_out, out_mma, dims,
                                                            cuda::FloatType::kBF16, delta, nullptr);
          if (e != cudaSuccess) return e;
          return i == 0
                     ? cuda::flash_attention_backward_simt(d_out, q, k, v, lse, delta, c.cu.data(),
                                                           documents, dims, cuda::FloatType::kBF16,
                                                           dq[0], dk[0], dv[0], nullptr)
                     : cuda::flash_attention_backward_mma(d_out, q, k, v, lse, delta, c.cu.data(),
                                                          documents, dims, cuda::FloatType::kBF16,
                                                          dq[1], dk[1], dv[1], nullptr);
        };
      };
      const double simt_back = median_ms(backward(0), repeats, start, stop);
      const double mma_back = median_ms(backward(1), repeats, start, stop);
      const double pairs = visible_pairs(c);
      const double back_flops = 10.0 * kD * pairs * kHeads;
      char row[512];
      std::snprintf(
          row, sizeof row, "| %s | %lld | %.3f | %.1f | %.3f | %.1f | %.2f | %.3g | %.3g |",
          c.mask.c_str(), static_cast<long long>(t), simt_back, back_flops / simt_back / 1e9,
          mma_back, back_flops / mma_back / 1e9, simt_back / mma_back,
          largest_difference(dq[0], dq[1], q_elems), largest_difference(dk[0], dk[1], kv_elems));
      backward_rows.push_back(row);
      const double flops = 4.0 * kD * pairs * kHeads;
      std::printf("| %s | %lld | %.3g | %.3f | %.1f | %.3f | %.1f | %.2f | %.3g |\n",
                  c.mask.c_str(), static_cast<long long>(t), pairs, simt, flops / simt / 1e9, mma,
                  flops / mma / 1e9, simt / mma, largest);
    }
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out_simt), cudaFree(out_mma), cudaFree(lse);
    cudaFree(delta), cudaFree(d_out);
    for (int i = 0; i < 2; ++i)
      cudaFree(dq[i]), cudaFree(dk[i]), cudaFree(dv[i]);
    cudaEventDestroy(start), cudaEventDestroy(stop);
  }
  std::printf(
      "\nbackward (delta, dq, dk, dv)\n\n| mask | T | SIMT ms | SIMT TFLOP/s | tensor cores ms | "
      "tensor cores TFLOP/s | tensor / SIMT | largest |dq| difference | largest |dk| "
      "difference |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& row : backward_rows)
    std::printf("%s\n", row.c_str());
  return 0;
}
