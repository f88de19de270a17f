// embedding_forward / embedding_backward on cpu against a float64 reference
// and central finite differences of it, fp32 and bf16, with repeated ids;
// bit-identical gradients on 1 and many threads; ids outside the vocabulary;
// meta accepts, rejects and allocates exactly as cpu does (backward's
// workspace included).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace headroom::backend_test {
namespace {

// ---- inputs ----

// Ids in [0, vocab) with repeats (vocab is small next to the token count in
// most cases), the first token's id repeated at the end so the first and last
// rows of the sorted order share an id.
std::vector<int32_t> random_ids(int64_t tokens, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int32_t& id : ids)
    id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  if (tokens > 1) ids.back() = ids.front();
  return ids;
}

Tensor make_ids(Backend& be, const std::vector<int32_t>& values) {
  Tensor t = be.empty({static_cast<int64_t>(values.size())}, DType::kI32, Category::kActivation,
                      "batch.tokens");
  be.copy_from_host(values.data(), t);
  return t;
}

struct Case {
  int64_t vocab, tokens, width;
  DType dtype;
  std::string name() const {
    return "V " + std::to_string(vocab) + ", T " + std::to_string(tokens) + ", C " +
           std::to_string(width) + " " + std::string(name_of(dtype));
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t vocab : {7, 300})            // 7: every id repeats; 300: most ids once
    for (int64_t tokens : {1, 3, 17, 300})  // 300 x 130: the parallel path
      for (int64_t width : {5, 64, 130})
        for (DType dtype : {DType::kF32, DType::kBF16})
          all.push_back({vocab, tokens, width, dtype});
  return all;
}

// ---- tests ----

TEST(CpuEmbedding, ForwardCopiesRowsExactly) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    std::vector<int32_t> ids = random_ids(c.tokens, c.vocab, 1);
    Tensor table =
        make(be, {c.vocab, c.width}, c.dtype, random_values(c.vocab * c.width, 2), "embed_tokens");
    Tensor out = be.empty({c.tokens, c.width}, c.dtype, Category::kActivation, "embed.out");
    be.embedding_forward(table, make_ids(be, ids), out);
    std::vector<double> t = download(table), o = download(out);
    for (int64_t i = 0; i < c.tokens; ++i)
      for (int64_t j = 0; j < c.width; ++j)
        ASSERT_EQ(o[static_cast<size_t>(i * c.width + j)],
                  t[static_cast<size_t>(ids[static_cast<size_t>(i)] * c.width + j)])
            << c.name() << " [" << i << ", " << j << "]";
  }
}

TEST(CpuEmbedding, BackwardMatchesFiniteDifferences) {
  for (const Case& c : cases()) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    std::vector<int32_t> ids = random_ids(c.tokens, c.vocab, 3);
    Tensor d_out =
        make(be, {c.tokens, c.width}, c.dtype, random_values(c.tokens * c.width, 4), "embed.grad");
    Tensor d_table = make(be, {c.vocab, c.width}, c.dtype, random_values(c.vocab * c.width, 5),
                          "embed_tokens.grad");
    std::vector<double> before = download(d_table);
    be.embedding_backward(d_out, make_ids(be, ids), d_table);
    std::vector<double> after = download(d_table);

    // Loss = sum g[t, c] * table[ids[t], c] of the float64 forward, linear in
    // the table: central differences with h = 0.5 are exact up to rounding.
    // Column c of the table reaches only column c of the loss.
    std::vector<double> g = download(d_out), table(static_cast<size_t>(c.vocab * c.width), 0.5);
    for (int64_t col = 0; col < c.width; ++col) {
      auto column_loss = [&] {
        double loss = 0;
        for (int64_t t = 0; t < c.tokens; ++t)
          loss += g[static_cast<size_t>(t * c.width + col)] *
                  table[static_cast<size_t>(ids[static_cast<size_t>(t)] * c.width + col)];
        return loss;
      };
      for (int64_t v = 0; v < c.vocab; ++v) {
        auto i = static_cast<size_t>(v * c.width + col);
        double expected = before[i] + central_difference(column_loss, table[i], 0.5);
        // The op sums the k rows of token v in fp32 and adds the sum to
        // d_table: k + 1 fp32 additions, so within (k + 1) * 2^-24 * (the sum
        // of the magnitudes), the textbook bound of recursive summation. bf16
        // then rounds that once more, at most 2^-8 relative (8 significant bits). A lost or doubled
        // repeat is off by >= 0.25.
        int64_t k = std::count(ids.begin(), ids.end(), static_cast<int32_t>(v));
        double magnitudes = std::fabs(before[i]);
        for (int64_t t = 0; t < c.tokens; ++t)
          if (ids[static_cast<size_t>(t)] == v)
            magnitudes += std::fabs(g[static_cast<size_t>(t * c.width + col)]);
        double bound = static_cast<double>(k + 1) * std::ldexp(magnitudes, -24);
        if (c.dtype == DType::kBF16) bound += std::ldexp(std::fabs(expected) + bound, -8);
        if (k == 0) bound = 0;  // an absent token's row is untouched, exactly
        ASSERT_LE(std::fabs(after[i] - expected), bound)
            << c.name() << " d_table[" << v << ", " << col << "] (token seen " << k << "x)";
      }
    }
  }
}

TEST(CpuEmbedding, BackwardSameBitsForAnyThreadCount) {
  // 3 ids over 40000 tokens: each d_table row sums ~13000 rows, where any
  // change of order changes the rounding.
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    BackendUnderTest cpu(kCpu);
    Backend& be = *cpu.backend;
    const int64_t vocab = 3, tokens = 40000, width = 130;
    Tensor ids = make_ids(be, random_ids(tokens, vocab, 6));
    Tensor d_out = make(be, {tokens, width}, dtype, random_values(tokens * width, 7), "d_out");
    Tensor d_table = be.empty({vocab, width}, dtype, Category::kGrad, "d_table");
    std::vector<float> initial = random_values(vocab * width, 8);
    auto results =
        bytes_per_thread_count([&] { upload(d_table, initial); },
                               [&] { be.embedding_backward(d_out, ids, d_table); }, d_table);
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(results[i], results[0]) << name_of(dtype) << ", thread count #" << i;
  }
}

TEST(CpuEmbedding, IdsOutsideTheVocabularyAreRejectedBeforeAnythingIsWritten) {
  BackendUnderTest cpu(kCpu);
  Backend& be = *cpu.backend;
  Tensor table = make(be, {7, 5}, DType::kF32, random_values(35, 9), "embed_tokens");
  Tensor out = be.empty({4, 5}, DType::kF32, Category::kActivation, "embed.out");
  try {
    be.embedding_forward(table, make_ids(be, {1, 2, 7, 3}), out);
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "embedding_forward: ids 'batch.tokens' int32 [4] holds 7 at [2], outside [0, 7) of "
              "table 'embed_tokens' fp32 [7, 5] (-1 marks another rank's token)");
  }
  // -1 is another rank's token (a zero row); -2 is nobody's.
  EXPECT_THROW(be.embedding_forward(table, make_ids(be, {-2, 2, 3, 3}), out), InternalError);

  // Backward: d_table untouched. Ids are values, which only the kernel can
  // read, so the front's scratch (the sort order) was taken before the check
  // and is handed back when it throws: nothing stays live.
  Tensor d_out = make(be, {4, 5}, DType::kF32, random_values(20, 10), "embed.grad");
  Tensor d_table = make(be, {7, 5}, DType::kF32, random_values(35, 11), "embed_tokens.grad");
  Tensor bad = make_ids(be, {0, 1, 2, -3});
  std::vector<double> before = download(d_table);
  EventRecorder recorder(cpu.allocator);
  EXPECT_THROW(be.embedding_backward(d_out, bad, d_table), InternalError);
  ASSERT_EQ(recorder.events().size(), 2u);
  EXPECT_EQ(std::get<3>(recorder.events()[0]), "embedding_backward.order");
  EXPECT_EQ(std::get<0>(recorder.events()[1]), MemoryAction::kFree);
  EXPECT_EQ(cpu.allocator.live(Category::kWorkspace), 0u);
  EXPECT_EQ(download(d_table), before);
}

TEST(CpuEmbedding, NoTokensIsANoOp) {
  // An empty micro-batch slice: a 0-byte order (no allocator event), nothing
  // written.
  for (BackendKind kind : {kCpu, kMeta}) {
    BackendUnderTest under_test(kind);
    Backend& be = *under_test.backend;
    Tensor ids = be.empty({0}, DType::kI32, Category::kActivation, "batch.tokens");
    Tensor table = input(be, {7, 5}, DType::kBF16, "embed_tokens", 1);
    Tensor out = be.empty({0, 5}, DType::kBF16, Category::kActivation, "embed.out");
    EventRecorder recorder(under_test.allocator);
    be.embedding_forward(table, ids, out);
    be.embedding_backward(out, ids, table);
    EXPECT_TRUE(recorder.events().empty()) << name_of(kind);
  }
}

// ---- meta = cpu ----

TEST(MetaParity, Embedding) {
  expect_same_events([](Backend& be) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor table = input(be, {300, 130}, dtype, "embed_tokens", 1);
      Tensor ids = be.empty({517}, DType::kI32, Category::kActivation, "batch.tokens");
      be.fill(ids, 3.0f);
      Tensor out = be.empty({517, 130}, dtype, Category::kActivation, "embed.out");
      be.embedding_forward(table, ids, out);
      Tensor d_table = be.empty({300, 130}, dtype, Category::kGrad, "embed_tokens.grad");
      be.fill(d_table, 0.0f);
      be.embedding_backward(out, ids, d_table);
      // Past 1 MiB of order: the workspace comes from the large pool.
      Tensor many = be.empty({300000}, DType::kI32, Category::kActivation, "batch.tokens");
      be.fill(many, 1.0f);
      Tensor d_many = be.empty({300000, 1}, dtype, Category::kActivation, "embed.grad");
      be.fill(d_many, 1.0f);
      Tensor d_narrow = be.empty({300, 1}, dtype, Category::kGrad, "narrow.grad");
      be.fill(d_narrow, 0.0f);
      be.embedding_backward(d_many, many, d_narrow);
    }
  });
}

TEST(MetaParity, EmbeddingBackwardHoldsItsOrderAsWorkspaceForTheCall) {
  for (BackendKind kind : {kCpu, kMeta}) {
    BackendUnderTest under_test(kind);
    Backend& be = *under_test.backend;
    Tensor ids = be.empty({17}, DType::kI32, Category::kActivation, "batch.tokens");
    be.fill(ids, 2.0f);
    Tensor d_out = input(be, {17, 5}, DType::kF32, "embed.grad", 1);
    Tensor d_table = be.empty({7, 5}, DType::kF32, Category::kGrad, "embed_tokens.grad");
    be.fill(d_table, 0.0f);
    EventRecorder recorder(under_test.allocator);
    be.embedding_backward(d_out, ids, d_table);
    uint64_t bytes = Allocator::round_size(17 * sizeof(int32_t));
    std::vector<EventRecord> expected = {
        {MemoryAction::kAlloc, bytes, Category::kWorkspace, "embedding_backward.order"},
        {MemoryAction::kFree, bytes, Category::kWorkspace, "embedding_backward.order"}};
    EXPECT_EQ(recorder.events(), expected) << name_of(kind);
    EXPECT_EQ(under_test.allocator.live(Category::kWorkspace), 0u);
  }
}

TEST(MetaParity, EmbeddingRejectedCallsSayTheSameAndAllocateNothing) {
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor d_out = be.empty({4, 8}, DType::kBF16, Category::kActivation, "embed.grad");
              Tensor ids = be.empty({4}, DType::kI32, Category::kActivation, "batch.tokens");
              Tensor d_table = be.empty({7, 9}, DType::kBF16, Category::kGrad, "embed.weight.grad");
              be.embedding_backward(d_out, ids, d_table);
            }),
            "embedding_backward: shape mismatch: d_table 'embed.weight.grad' bf16 [7, 9] vs "
            "d_out 'embed.grad' bf16 [4, 8]");
  EXPECT_EQ(rejected_alike([](Backend& be) {
              Tensor table = be.empty({7, 8}, DType::kF32, Category::kParam, "embed.weight");
              Tensor ids = be.empty({4}, DType::kI64, Category::kActivation, "batch.tokens");
              Tensor out = be.empty({4, 8}, DType::kF32, Category::kActivation, "embed.out");
              be.embedding_forward(table, ids, out);
            }),
            "embedding_forward: ids 'batch.tokens' int64 [4] must be int32");
  rejected_alike([](Backend& be) {
    Tensor table = be.empty({7, 8}, DType::kF32, Category::kParam, "embed.weight");
    Tensor ids = be.empty({4}, DType::kI32, Category::kActivation, "batch.tokens");
    Tensor out = be.empty({4, 8}, DType::kBF16, Category::kActivation, "embed.out");
    be.embedding_forward(table, ids, out);
  });
  rejected_alike([](Backend& be) {
    Tensor table = be.empty({7, 8}, DType::kF32, Category::kParam, "embed.weight");
    Tensor ids = be.empty({5}, DType::kI32, Category::kActivation, "batch.tokens");
    Tensor out = be.empty({4, 8}, DType::kF32, Category::kActivation, "embed.out");
    be.embedding_forward(table, ids, out);
  });
}

}  // namespace
}  // namespace headroom::backend_test
