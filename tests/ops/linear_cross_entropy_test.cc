// The fused linear + cross-entropy (backend/linear_cross_entropy.h):
//  - loss, d_hidden and d_weight equal a float64 reference of the mean
//    cross-entropy over counted tokens, for every chunk size and both modes;
//  - the memory it promises (seed 001): recompute holds one chunk of
//    category logits at a time, save holds all of them until backward, and
//    nothing of category logits outlives backward;
//  - meta makes exactly cpu's allocator events.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/linear_cross_entropy.h"
#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// Awkward sizes: nothing divides anything.
constexpr int64_t kTokens = 13;
constexpr int64_t kHidden = 24;
constexpr int64_t kVocab = 37;

// A backend over an allocator of the chosen policy (exact makes byte counts
// crisp; caching is what runs use).
struct Rig {
  Rig(BackendKind kind, AllocatorPolicy policy)
      : allocator(kind == kMeta ? make_virtual_source() : make_host_source(),
                  AllocatorOptions{policy, 0}),
        backend(kind == kMeta ? make_meta_backend(allocator) : make_cpu_backend(allocator)) {}
  Allocator allocator;
  std::unique_ptr<Backend> backend;
};

// Rows 1, 4, 7, 10 are not counted; the rest have random targets.
std::vector<int32_t> make_targets(int64_t tokens, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i)
    t[static_cast<size_t>(i)] =
        i % 3 == 1 ? -1 : static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

// The operands on either backend. On cpu they hold random never-zero values
// (hidden and weight) and the targets above; on meta they are only shapes.
struct Operands {
  Tensor hidden, weight, targets, loss_sum, d_hidden, d_weight;
};

struct Config {
  DType operands;  // hidden and weight
  DType logits;
  DType d_weight;  // d_hidden is the operands' dtype; d_weight may be an fp32 main grad
  // Relative to the largest reference value: against float64, and between
  // chunk sizes (fp32: rounding only; bf16: a rounding may flip by one ulp).
  double loss_tolerance, grad_tolerance, chunking_tolerance;
};

std::string name(const Config& c) {
  return std::string(name_of(c.operands)) + " operands, " + std::string(name_of(c.logits)) +
         " logits, " + std::string(name_of(c.d_weight)) + " d_weight";
}

const std::vector<Config> kConfigs = {
    {DType::kF32, DType::kF32, DType::kF32, 2e-6, 2e-6, 2e-6},
    // The fp32 upcast: exact bf16 inputs, fp32 logits; dlogits are rounded
    // to bf16 for the weight gemm and d_hidden is bf16: ~2^-8.
    {DType::kBF16, DType::kF32, DType::kF32, 2e-6, 8e-3, 4e-3},
    // bf16 logits: each logit rounded (2^-9 relative of values ~3).
    {DType::kBF16, DType::kBF16, DType::kF32, 5e-3, 1e-2, 4e-3},
    // bf16 d_weight accumulated chunk by chunk: rounded once per chunk.
    {DType::kBF16, DType::kBF16, DType::kBF16, 5e-3, 2e-2, 2e-2},
};

Operands make_operands(Backend& be, const Config& config, uint64_t seed) {
  Operands o;
  o.hidden = be.empty({kTokens, kHidden}, config.operands, Category::kActivation, "final_norm.out");
  o.weight = be.empty({kVocab, kHidden}, config.operands, Category::kParam, "lm_head.weight");
  o.targets = be.empty({kTokens}, DType::kI32, Category::kActivation, "batch.targets");
  o.loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss.sum");
  o.d_hidden =
      be.empty({kTokens, kHidden}, config.operands, Category::kActivation, "final_norm.d_out");
  o.d_weight = be.empty({kVocab, kHidden}, config.d_weight, Category::kGrad, "lm_head.weight.grad");
  if (be.kind() == kMeta) return o;
  upload(o.hidden, random_values(kTokens * kHidden, seed));
  upload(o.weight, random_values(kVocab * kHidden, seed + 1));
  std::vector<int32_t> t = make_targets(kTokens, kVocab, seed + 2);
  std::copy(t.begin(), t.end(), o.targets.data<int32_t>());
  be.fill(o.loss_sum, 0.0f);
  be.fill(o.d_hidden, std::nanf(""));  // written, never read
  // Accumulated into; small, like a gradient, so bf16 keeps the increments.
  std::vector<float> initial = random_values(kVocab * kHidden, seed + 3);
  for (float& x : initial)
    x *= 0.01f;
  upload(o.d_weight, initial);
  return o;
}

// Mean cross-entropy over counted tokens of logits = hidden @ weight^T, and
// its gradients, in float64 from the operands' exact values.
struct Reference {
  double loss_sum = 0;
  int64_t counted = 0;
  std::vector<double> d_hidden, d_weight;  // of the mean loss
};

Reference reference(const std::vector<double>& h, const std::vector<double>& w,
                    const std::vector<int32_t>& t) {
  Reference r;
  r.d_hidden.assign(h.size(), 0.0);
  r.d_weight.assign(w.size(), 0.0);
  for (int32_t target : t)
    r.counted += target >= 0;
  for (int64_t i = 0; i < kTokens; ++i) {
    int32_t target = t[static_cast<size_t>(i)];
    if (target < 0) continue;
    std::vector<double> logits(kVocab);
    for (int64_t v = 0; v < kVocab; ++v)
      for (int64_t c = 0; c < kHidden; ++c)
        logits[static_cast<size_t>(v)] +=
            h[static_cast<size_t>(i * kHidden + c)] * w[static_cast<size_t>(v * kHidden + c)];
    double max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double x : logits)
      sum += std::exp(x - max);
    double lse = max + std::log(sum);
    r.loss_sum += lse - logits[static_cast<size_t>(target)];
    for (int64_t v = 0; v < kVocab; ++v) {
      double g = (std::exp(logits[static_cast<size_t>(v)] - lse) - (v == target ? 1.0 : 0.0)) /
                 static_cast<double>(r.counted);
      for (int64_t c = 0; c < kHidden; ++c) {
        r.d_hidden[static_cast<size_t>(i * kHidden + c)] +=
            g * w[static_cast<size_t>(v * kHidden + c)];
        r.d_weight[static_cast<size_t>(v * kHidden + c)] +=
            g * h[static_cast<size_t>(i * kHidden + c)];
      }
    }
  }
  return r;
}

struct Result {
  double loss_sum = 0;
  std::vector<double> d_hidden, d_weight;
};

// Forward then backward with scale = 1 / counted tokens, as the trainer calls it.
Result run(Backend& be, Operands& o, const LinearCrossEntropyOptions& options, int64_t counted) {
  LinearCrossEntropySaved saved =
      linear_cross_entropy_forward(be, o.hidden, o.weight, o.targets, options, o.loss_sum);
  linear_cross_entropy_backward(be, o.hidden, o.weight, o.targets, saved, options,
                                1.0f / static_cast<float>(counted), o.d_hidden, o.d_weight);
  EXPECT_TRUE(saved.chunks.empty());
  EXPECT_FALSE(saved.lse.defined());
  Result r;
  if (be.kind() == kMeta) return r;
  r.loss_sum = download(o.loss_sum)[0];
  r.d_hidden = download(o.d_hidden);
  if (o.d_weight.defined()) r.d_weight = download(o.d_weight);  // undefined: frozen lm_head
  return r;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::abs(x));
  return m;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& expected,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  double limit = tolerance * max_abs(expected);
  for (size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], expected[k], limit) << what << " element " << k;
}

const std::vector<int64_t> kChunkSizes = {0, 1, 7, kTokens - 1, kTokens, kTokens + 5};

TEST(LinearCrossEntropy, MatchesFloat64ReferenceForEveryChunkSizeAndMode) {
  for (const Config& config : kConfigs) {
    Rig cpu(kCpu, AllocatorPolicy::kCaching);
    for (bool save : {false, true}) {
      Result whole;  // chunk_size 0: one chunk
      for (int64_t chunk_size : kChunkSizes) {
        SCOPED_TRACE(name(config) + (save ? ", save" : ", recompute") + ", chunk_size " +
                     std::to_string(chunk_size));
        Operands o = make_operands(*cpu.backend, config, 11);
        std::vector<double> d_weight_before = download(o.d_weight);
        std::vector<int32_t> targets(o.targets.data<int32_t>(),
                                     o.targets.data<int32_t>() + kTokens);
        Reference ref = reference(download(o.hidden), download(o.weight), targets);
        ASSERT_EQ(ref.counted, 9);
        Result got = run(*cpu.backend, o, {chunk_size, save, config.logits}, ref.counted);

        EXPECT_NEAR(got.loss_sum / ref.counted, ref.loss_sum / ref.counted,
                    config.loss_tolerance * ref.loss_sum / ref.counted);
        expect_close(got.d_hidden, ref.d_hidden, config.grad_tolerance, "d_hidden");
        // Accumulated: what was there plus the gradient.
        std::vector<double> d_weight_delta(got.d_weight.size());
        for (size_t k = 0; k < d_weight_delta.size(); ++k)
          d_weight_delta[k] = got.d_weight[k] - d_weight_before[k];
        expect_close(d_weight_delta, ref.d_weight, config.grad_tolerance, "d_weight - initial");

        // Chunking changes how the sums are grouped, nothing else.
        if (chunk_size == 0) {
          whole = got;
          continue;
        }
        EXPECT_NEAR(got.loss_sum, whole.loss_sum, 1e-6 * whole.loss_sum);
        expect_close(got.d_hidden, whole.d_hidden, config.chunking_tolerance,
                     "d_hidden vs one chunk");
        expect_close(got.d_weight, whole.d_weight, config.chunking_tolerance,
                     "d_weight vs one chunk");
      }
    }
  }
}

// Recomputing a chunk's logits is the same gemm on the same inputs: the two
// modes differ in memory only, not in a single bit of the results.
TEST(LinearCrossEntropy, SaveAndRecomputeGiveTheSameBits) {
  for (const Config& config : kConfigs) {
    for (int64_t chunk_size : kChunkSizes) {
      SCOPED_TRACE(name(config) + ", chunk_size " + std::to_string(chunk_size));
      Rig cpu(kCpu, AllocatorPolicy::kCaching);
      Operands saving = make_operands(*cpu.backend, config, 5);
      Operands recomputing = make_operands(*cpu.backend, config, 5);
      Result a = run(*cpu.backend, saving, {chunk_size, true, config.logits}, 9);
      Result b = run(*cpu.backend, recomputing, {chunk_size, false, config.logits}, 9);
      EXPECT_EQ(a.loss_sum, b.loss_sum);
      EXPECT_EQ(a.d_hidden, b.d_hidden);
      EXPECT_EQ(a.d_weight, b.d_weight);
    }
  }
}

// A frozen lm_head (LoRA) is an undefined d_weight: only the weight
// gradient's gemm goes, so the loss and d_hidden keep every bit.
TEST(LinearCrossEntropy, FrozenLmHeadGivesTheSameDHidden) {
  for (const Config& config : kConfigs) {
    for (bool save : {false, true}) {
      for (int64_t chunk_size : kChunkSizes) {
        SCOPED_TRACE(name(config) + (save ? ", save" : ", recompute") + ", chunk_size " +
                     std::to_string(chunk_size));
        Rig cpu(kCpu, AllocatorPolicy::kCaching);
        Operands training = make_operands(*cpu.backend, config, 5);
        Operands frozen = make_operands(*cpu.backend, config, 5);
        frozen.d_weight = Tensor();
        Result a = run(*cpu.backend, training, {chunk_size, save, config.logits}, 9);
        Result b = run(*cpu.backend, frozen, {chunk_size, save, config.logits}, 9);
        EXPECT_EQ(a.loss_sum, b.loss_sum);
        EXPECT_EQ(a.d_hidden, b.d_hidden);
        EXPECT_TRUE(b.d_weight.empty());
      }
    }
  }
}

// ---- memory: the point of the two modes (seed 001) ----

uint64_t bytes_of(int64_t rows, DType dtype) {
  return static_cast<uint64_t>(rows * kVocab) * size_of(dtype);
}

// The allocator events of category logits, in order.
std::vector<EventRecord> logits_events(const std::vector<EventRecord>& events) {
  std::vector<EventRecord> out;
  for (const EventRecord& e : events)
    if (std::get<2>(e) == Category::kLogits &&
        (std::get<0>(e) == MemoryAction::kAlloc || std::get<0>(e) == MemoryAction::kFree))
      out.push_back(e);
  return out;
}

EventRecord alloc(uint64_t bytes, const std::string& tag) {
  return {MemoryAction::kAlloc, bytes, Category::kLogits, tag};
}
EventRecord free_(uint64_t bytes, const std::string& tag) {
  return {MemoryAction::kFree, bytes, Category::kLogits, tag};
}
std::string logits_tag(int i) {
  return "loss.chunk." + std::to_string(i) + ".logits";
}

// chunk_size 4 over 13 tokens: chunks of 4, 4, 4 and 1 rows.
constexpr int64_t kChunk = 4;

struct Peaks {
  uint64_t forward_peak, live_after_forward, backward_peak, live_after_backward;
  std::vector<EventRecord> forward_events, backward_events;
};

Peaks measure(BackendKind kind, AllocatorPolicy policy, const Config& config, bool save,
              bool frozen_lm_head = false) {
  Rig s(kind, policy);
  Operands o = make_operands(*s.backend, config, 3);
  if (frozen_lm_head) o.d_weight = Tensor();
  LinearCrossEntropyOptions options{kChunk, save, config.logits};
  Peaks p;
  s.allocator.reset_peaks();
  LinearCrossEntropySaved saved;
  {
    EventRecorder recorder(s.allocator);
    saved = linear_cross_entropy_forward(*s.backend, o.hidden, o.weight, o.targets, options,
                                         o.loss_sum);
    p.forward_events = logits_events(recorder.events());
  }
  p.forward_peak = s.allocator.peak(Category::kLogits);
  p.live_after_forward = s.allocator.live(Category::kLogits);
  EXPECT_EQ(saved.lse.category(), Category::kActivation);
  EXPECT_EQ(saved.lse.tag(), "loss.lse");
  EXPECT_EQ(saved.lse.shape(), Shape{kTokens});
  s.allocator.reset_peaks();
  {
    EventRecorder recorder(s.allocator);
    linear_cross_entropy_backward(*s.backend, o.hidden, o.weight, o.targets, saved, options,
                                  1.0f / 9, o.d_hidden, o.d_weight);
    p.backward_events = logits_events(recorder.events());
  }
  p.backward_peak = s.allocator.peak(Category::kLogits);
  p.live_after_backward = s.allocator.live(Category::kLogits);
  return p;
}

TEST(LinearCrossEntropyMemory, RecomputeHoldsOneChunkAtATime) {
  const Config& config = kConfigs[0];  // fp32 logits from fp32 operands
  uint64_t chunk = bytes_of(kChunk, DType::kF32);
  uint64_t last = bytes_of(1, DType::kF32);
  // Each chunk is freed before the next is allocated, in forward and again
  // (recomputed) in backward.
  std::vector<EventRecord> expected;
  for (int i = 0; i < 4; ++i) {
    uint64_t bytes = i < 3 ? chunk : last;
    expected.push_back(alloc(bytes, logits_tag(i)));
    expected.push_back(free_(bytes, logits_tag(i)));
  }
  for (BackendKind kind : {kCpu, kMeta}) {  // the plan shows what the run does
    SCOPED_TRACE(std::string(name_of(kind)));
    Peaks p = measure(kind, AllocatorPolicy::kExact, config, false);
    EXPECT_EQ(p.forward_peak, chunk);
    EXPECT_EQ(p.live_after_forward, 0u);
    EXPECT_EQ(p.backward_peak, chunk);
    EXPECT_EQ(p.live_after_backward, 0u);
    EXPECT_EQ(p.forward_events, expected);
    EXPECT_EQ(p.backward_events, expected);
  }
}

// Seed 001's trap: chunking bounds one allocation, not what is kept.
TEST(LinearCrossEntropyMemory, SaveKeepsEveryChunkUntilBackward) {
  const Config& config = kConfigs[0];
  uint64_t all = bytes_of(kTokens, DType::kF32);  // T x V x 4, whatever the chunk size
  std::vector<EventRecord> forward, backward;
  for (int i = 0; i < 4; ++i) {
    uint64_t bytes = bytes_of(i < 3 ? kChunk : 1, DType::kF32);
    forward.push_back(alloc(bytes, logits_tag(i)));
    backward.push_back(free_(bytes, logits_tag(i)));  // as it goes, no recompute
  }
  for (BackendKind kind : {kCpu, kMeta}) {
    SCOPED_TRACE(std::string(name_of(kind)));
    Peaks p = measure(kind, AllocatorPolicy::kExact, config, true);
    EXPECT_EQ(p.forward_peak, all);
    EXPECT_EQ(p.live_after_forward, all);
    EXPECT_EQ(p.backward_peak, all);
    EXPECT_EQ(p.live_after_backward, 0u);
    EXPECT_EQ(p.forward_events, forward);
    EXPECT_EQ(p.backward_events, backward);
  }
}

// The fp32 upcast with bf16 weights: backward's dlogits go back to bf16 for
// the weight gemm, a second (Tc, V) buffer alive with the fp32 chunk.
TEST(LinearCrossEntropyMemory, Fp32UpcastAddsABf16DlogitsChunkInBackward) {
  const Config& config = kConfigs[1];
  uint64_t chunk = bytes_of(kChunk, DType::kF32);
  uint64_t narrow = bytes_of(kChunk, DType::kBF16);
  {
    Peaks p = measure(kCpu, AllocatorPolicy::kExact, config, false);
    EXPECT_EQ(p.forward_peak, chunk);  // gemm writes fp32 directly: no bf16 logits
    EXPECT_EQ(p.backward_peak, chunk + narrow);
    EXPECT_EQ(p.live_after_backward, 0u);
    std::vector<EventRecord> expected;
    for (int i = 0; i < 4; ++i) {
      int64_t rows = i < 3 ? kChunk : 1;
      std::string dlogits = "loss.chunk." + std::to_string(i) + ".dlogits";
      expected.push_back(alloc(bytes_of(rows, DType::kF32), logits_tag(i)));
      expected.push_back(alloc(bytes_of(rows, DType::kBF16), dlogits));
      expected.push_back(free_(bytes_of(rows, DType::kF32), logits_tag(i)));
      expected.push_back(free_(bytes_of(rows, DType::kBF16), dlogits));
    }
    EXPECT_EQ(p.backward_events, expected);
  }
  {
    Peaks p = measure(kCpu, AllocatorPolicy::kExact, config, true);
    EXPECT_EQ(p.forward_peak, bytes_of(kTokens, DType::kF32));
    EXPECT_EQ(p.backward_peak, bytes_of(kTokens, DType::kF32) + narrow);
    EXPECT_EQ(p.live_after_backward, 0u);
  }
}

// The allocations and frees of backward, every category, in order.
std::vector<EventRecord> block_events(BackendKind kind, const Config& config, bool save,
                                      int64_t chunk_size, bool frozen_lm_head) {
  Rig s(kind, AllocatorPolicy::kExact);
  Operands o = make_operands(*s.backend, config, 3);
  if (frozen_lm_head) o.d_weight = Tensor();
  LinearCrossEntropyOptions options{chunk_size, save, config.logits};
  LinearCrossEntropySaved saved =
      linear_cross_entropy_forward(*s.backend, o.hidden, o.weight, o.targets, options, o.loss_sum);
  EventRecorder recorder(s.allocator);
  linear_cross_entropy_backward(*s.backend, o.hidden, o.weight, o.targets, saved, options, 1.0f / 9,
                                o.d_hidden, o.d_weight);
  std::vector<EventRecord> out;
  for (const EventRecord& e : recorder.events())
    if (std::get<0>(e) == MemoryAction::kAlloc || std::get<0>(e) == MemoryAction::kFree)
      out.push_back(e);
  return out;
}

// A frozen lm_head keeps every logits buffer (d_hidden needs the dlogits,
// upcast copy included) and drops only what the weight gemm held: its
// backward's events are the full backward's with some workspace ones left
// out, nothing added.
TEST(LinearCrossEntropyMemory, FrozenLmHeadDropsOnlyTheWeightGemmsWorkspace) {
  for (const Config& config : kConfigs) {
    for (bool save : {false, true}) {
      for (int64_t chunk_size : {int64_t{0}, int64_t{1}, kChunk}) {
        SCOPED_TRACE(name(config) + (save ? ", save" : ", recompute") + ", chunk_size " +
                     std::to_string(chunk_size));
        Peaks full = measure(kCpu, AllocatorPolicy::kExact, config, save);
        Peaks frozen = measure(kCpu, AllocatorPolicy::kExact, config, save, true);
        EXPECT_EQ(frozen.backward_events, full.backward_events);  // category logits
        EXPECT_EQ(frozen.backward_peak, full.backward_peak);
        EXPECT_EQ(frozen.live_after_backward, 0u);

        std::vector<EventRecord> all = block_events(kCpu, config, save, chunk_size, false);
        std::vector<EventRecord> some = block_events(kCpu, config, save, chunk_size, true);
        size_t next = 0;  // `some` must be a subsequence of `all`
        for (const EventRecord& e : all) {
          if (next < some.size() && some[next] == e) {
            ++next;
            continue;
          }
          EXPECT_EQ(std::get<2>(e), Category::kWorkspace) << "left out: " << to_string(e);
        }
        EXPECT_EQ(next, some.size()) << "the frozen backward made an event the full one did not: "
                                     << (next < some.size() ? to_string(some[next]) : "");
      }
    }
  }
}

// bf16 logits halve every figure, and the caching policy rounds each block
// (512 B here): the peaks are the rounded blocks, as in PyTorch.
TEST(LinearCrossEntropyMemory, CachingPolicyAndBf16Logits) {
  const Config& config = kConfigs[2];
  uint64_t chunk = Allocator::round_size(bytes_of(kChunk, DType::kBF16));
  uint64_t last = Allocator::round_size(bytes_of(1, DType::kBF16));
  Peaks recompute = measure(kCpu, AllocatorPolicy::kCaching, config, false);
  EXPECT_EQ(recompute.forward_peak, chunk);
  EXPECT_EQ(recompute.backward_peak, chunk);
  EXPECT_EQ(recompute.live_after_backward, 0u);
  Peaks save = measure(kCpu, AllocatorPolicy::kCaching, config, true);
  EXPECT_EQ(save.forward_peak, 3 * chunk + last);
  EXPECT_EQ(save.live_after_forward, 3 * chunk + last);
  EXPECT_EQ(save.live_after_backward, 0u);
}

// One chunk (chunk_size 0 or >= T) is the unchunked loss: both modes peak at
// the whole (T, V).
TEST(LinearCrossEntropyMemory, OneChunkIsTheWholeLogits) {
  for (int64_t chunk_size : {int64_t{0}, kTokens, kTokens + 5}) {
    for (bool save : {false, true}) {
      Rig s(kCpu, AllocatorPolicy::kExact);
      Operands o = make_operands(*s.backend, kConfigs[0], 3);
      LinearCrossEntropyOptions options{chunk_size, save, DType::kF32};
      LinearCrossEntropySaved saved = linear_cross_entropy_forward(*s.backend, o.hidden, o.weight,
                                                                   o.targets, options, o.loss_sum);
      EXPECT_EQ(s.allocator.peak(Category::kLogits), bytes_of(kTokens, DType::kF32));
      EXPECT_EQ(saved.chunks.size(), save ? 1u : 0u);
    }
  }
}

TEST(LinearCrossEntropy, NoTokensIsNothing) {
  Rig s(kCpu, AllocatorPolicy::kExact);
  Backend& be = *s.backend;
  Tensor hidden = be.empty({0, kHidden}, DType::kF32, Category::kActivation, "h");
  Tensor weight = be.empty({kVocab, kHidden}, DType::kF32, Category::kParam, "w");
  Tensor targets = be.empty({0}, DType::kI32, Category::kActivation, "t");
  Tensor loss_sum = be.empty({1}, DType::kF32, Category::kActivation, "loss.sum");
  be.fill(loss_sum, 1.5f);
  Tensor d_hidden = be.empty({0, kHidden}, DType::kF32, Category::kActivation, "dh");
  Tensor d_weight = be.empty({kVocab, kHidden}, DType::kF32, Category::kGrad, "dw");
  be.fill(d_weight, 2.0f);
  for (bool save : {false, true}) {
    LinearCrossEntropyOptions options{4, save, DType::kF32};
    LinearCrossEntropySaved saved =
        linear_cross_entropy_forward(be, hidden, weight, targets, options, loss_sum);
    linear_cross_entropy_backward(be, hidden, weight, targets, saved, options, 1.0f, d_hidden,
                                  d_weight);
  }
  EXPECT_EQ(download(loss_sum)[0], 1.5);
  for (double v : download(d_weight))
    ASSERT_EQ(v, 2.0);
  EXPECT_EQ(s.allocator.peak(Category::kLogits), 0u);
}

// ---- plan = run ----

TEST(MetaParity, LinearCrossEntropy) {
  for (const Config& config : kConfigs) {
    for (bool save : {false, true}) {
      for (int64_t chunk_size : {int64_t{0}, int64_t{1}, kChunk}) {
        SCOPED_TRACE(name(config) + (save ? ", save" : ", recompute") + ", chunk_size " +
                     std::to_string(chunk_size));
        auto scenario = [&](BackendKind kind) {
          Rig s(kind, AllocatorPolicy::kCaching);
          EventRecorder recorder(s.allocator);
          Operands o = make_operands(*s.backend, config, 3);
          run(*s.backend, o, {chunk_size, save, config.logits}, 9);
          return std::make_pair(recorder.events(), s.allocator.stats().peak_by_category);
        };
        auto [cpu, cpu_peaks] = scenario(kCpu);
        auto [meta, meta_peaks] = scenario(kMeta);
        ASSERT_FALSE(logits_events(cpu).empty());
        ASSERT_EQ(cpu.size(), meta.size());
        for (size_t i = 0; i < cpu.size(); ++i)
          ASSERT_EQ(cpu[i], meta[i])
              << "event " << i << ": cpu " << to_string(cpu[i]) << ", meta " << to_string(meta[i]);
        EXPECT_EQ(cpu_peaks, meta_peaks);
      }
    }
  }
}

TEST(MetaParity, LinearCrossEntropyFrozenLmHead) {
  for (const Config& config : kConfigs) {
    for (bool save : {false, true}) {
      for (int64_t chunk_size : {int64_t{0}, int64_t{1}, kChunk}) {
        SCOPED_TRACE(name(config) + (save ? ", save" : ", recompute") + ", chunk_size " +
                     std::to_string(chunk_size));
        auto scenario = [&](BackendKind kind) {
          Rig s(kind, AllocatorPolicy::kCaching);
          EventRecorder recorder(s.allocator);
          Operands o = make_operands(*s.backend, config, 3);
          o.d_weight = Tensor();
          run(*s.backend, o, {chunk_size, save, config.logits}, 9);
          return std::make_pair(recorder.events(), s.allocator.stats().peak_by_category);
        };
        auto [cpu, cpu_peaks] = scenario(kCpu);
        auto [meta, meta_peaks] = scenario(kMeta);
        ASSERT_FALSE(logits_events(cpu).empty());
        ASSERT_EQ(cpu.size(), meta.size());
        for (size_t i = 0; i < cpu.size(); ++i)
          ASSERT_EQ(cpu[i], meta[i])
              << "event " << i << ": cpu " << to_string(cpu[i]) << ", meta " << to_string(meta[i]);
        EXPECT_EQ(cpu_peaks, meta_peaks);
      }
    }
  }
}

// Bad calls say what is wrong, the same on cpu and meta, before allocating.
TEST(MetaParity, LinearCrossEntropyRejectsTheSameCalls) {
  struct BadCall {
    std::function<void(Backend&, Operands&)> call;
    std::string message;
  };
  const std::vector<BadCall> bad_calls = {
      {[](Backend& be, Operands& o) {
         Tensor w =
             be.empty({kVocab, kHidden + 1}, DType::kF32, Category::kParam, "lm_head.weight");
         linear_cross_entropy_forward(be, o.hidden, w, o.targets, {0, false, DType::kF32},
                                      o.loss_sum);
       },
       "linear_cross_entropy_forward: hidden size differs: hidden 'final_norm.out' fp32 [13, 24] "
       "has C = 24, weight 'lm_head.weight' fp32 [37, 25] has C = 25"},
      {[](Backend& be, Operands& o) {
         linear_cross_entropy_forward(be, o.hidden, o.weight, o.targets, {0, false, DType::kBF16},
                                      o.loss_sum);
       },
       "linear_cross_entropy_forward: logits dtype bf16 must be fp32 or the dtype of hidden "
       "'final_norm.out' fp32 [13, 24]"},
      {[](Backend& be, Operands& o) {
         linear_cross_entropy_forward(be, o.hidden, o.weight, o.targets, {-1, false, DType::kF32},
                                      o.loss_sum);
       },
       "linear_cross_entropy_forward: chunk_size -1 is negative (0 = one chunk)"},
      {[](Backend& be, Operands& o) {
         // Forward in save mode, backward told recompute: the kept chunks
         // would be silently ignored (and double the memory).
         LinearCrossEntropySaved saved = linear_cross_entropy_forward(
             be, o.hidden, o.weight, o.targets, {4, true, DType::kF32}, o.loss_sum);
         linear_cross_entropy_backward(be, o.hidden, o.weight, o.targets, saved,
                                       {4, false, DType::kF32}, 1.0f, o.d_hidden, o.d_weight);
       },
       "linear_cross_entropy_backward: saved holds 4 logits chunks, mode recompute with "
       "chunk_size 4 over 13 tokens expects 0 (forward and backward must use the same options; "
       "backward runs once)"},
      {[](Backend& be, Operands& o) {
         Tensor d_weight =
             be.empty({kVocab, kHidden}, DType::kBF16, Category::kGrad, "lm_head.weight.grad");
         LinearCrossEntropySaved saved = linear_cross_entropy_forward(
             be, o.hidden, o.weight, o.targets, {4, false, DType::kF32}, o.loss_sum);
         linear_cross_entropy_backward(be, o.hidden, o.weight, o.targets, saved,
                                       {4, false, DType::kF32}, 1.0f, o.d_hidden, d_weight);
       },
       "linear_cross_entropy_backward: d_weight 'lm_head.weight.grad' bf16 [37, 24] must be fp32 "
       "or the dtype of weight 'lm_head.weight' fp32 [37, 24]"},
      {[](Backend& be, Operands& o) {
         // Only d_weight may be left out (a frozen lm_head): d_hidden feeds
         // the rest of backward.
         Tensor d_hidden, d_weight;
         LinearCrossEntropySaved saved = linear_cross_entropy_forward(
             be, o.hidden, o.weight, o.targets, {4, false, DType::kF32}, o.loss_sum);
         linear_cross_entropy_backward(be, o.hidden, o.weight, o.targets, saved,
                                       {4, false, DType::kF32}, 1.0f, d_hidden, d_weight);
       },
       "linear_cross_entropy_backward: d_hidden is an undefined tensor"},
      {[](Backend& be, Operands& o) {
         Tensor d_weight;
         LinearCrossEntropySaved saved = linear_cross_entropy_forward(
             be, o.hidden, o.weight, o.targets, {4, false, DType::kF32}, o.loss_sum);
         linear_cross_entropy_backward(
             be, o.hidden, o.weight, o.targets, saved, {4, false, DType::kF32},
             std::numeric_limits<float>::infinity(), o.d_hidden, d_weight);
       },
       "linear_cross_entropy_backward: scale inf is not finite (for 'final_norm.d_out' fp32 "
       "[13, 24])"},
  };
  for (size_t i = 0; i < bad_calls.size(); ++i) {
    std::string messages[2];
    for (int kind = 0; kind < 2; ++kind) {
      Rig s(kind == 0 ? kCpu : kMeta, AllocatorPolicy::kExact);
      Operands o = make_operands(*s.backend, kConfigs[0], 3);
      uint64_t live = s.allocator.allocated();
      try {
        bad_calls[i].call(*s.backend, o);
        ADD_FAILURE() << "call " << i << " was accepted";
      } catch (const InternalError& e) {
        messages[kind] = e.what();
      }
      EXPECT_EQ(s.allocator.allocated(), live) << "call " << i << ": nothing left behind";
      EXPECT_EQ(s.allocator.live(Category::kLogits), 0u) << "call " << i;
    }
    EXPECT_EQ(messages[0], bad_calls[i].message) << "call " << i;
    EXPECT_EQ(messages[0], messages[1]) << "call " << i;
  }
}

}  // namespace
}  // namespace headroom::backend_test
