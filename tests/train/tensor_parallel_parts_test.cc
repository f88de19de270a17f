// How a checkpoint of one parallel.tensor is read under another: a group's
// parts at one size cut into its parts at another (model/tensor_parallel.h,
// copy_from_parts), against parts cut straight from the whole tensors, and
// the split rule a Transformer states for its groups against the layouts a
// tensor-parallel run really has.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "memory/allocator.h"
#include "memory/segment_source.h"
#include "model/layouts.h"
#include "model/tensor_parallel.h"
#include "model/transformer.h"
#include "train_test_util.h"

namespace headroom {
namespace {

// A group with every kind of spec: rows split (a projection, a bias),
// columns split, replicated.
SplitGroup mixed_group() {
  SplitGroup group;
  group.whole = GroupLayout::make("block.0", {{"w_rows", {12, 5}},
                                              {"norm", {7}},
                                              {"w_cols", {3, 12}},
                                              {"bias", {12}},
                                              {"w_cols_wide", {2, 24}}});
  group.split_dims = {0, -1, 1, 0, 1};
  return group;
}

// Part `rank` of `size` of the whole flat group `whole`, cut spec by spec
// from the whole tensors (the reference: row r of a row split is whole row
// rank * rows + r, column c of a column split whole column rank * cols + c).
std::vector<int32_t> part_of(const SplitGroup& group, const std::vector<int32_t>& whole, int rank,
                             int size) {
  const GroupLayout part = group.part_layout(size);
  std::vector<int32_t> out(static_cast<size_t>(part.numel));
  for (size_t i = 0; i < part.specs.size(); ++i) {
    const Shape& shape = part.specs[i].shape;
    const Shape& full = group.whole.specs[i].shape;
    const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
    const int64_t full_cols = full.size() > 1 ? full[1] : 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t wr = r, wc = c;
        if (group.split_dims[i] == 0) wr += rank * rows;
        if (group.split_dims[i] == 1) wc += rank * cols;
        out[static_cast<size_t>(part.offsets[i] + r * cols + c)] =
            whole[static_cast<size_t>(group.whole.offsets[i] + wr * full_cols + wc)];
      }
  }
  return out;
}

TEST(TensorParallelParts, APartLayoutDividesTheSplitDimensionsOnly) {
  const GroupLayout part = mixed_group().part_layout(3);
  ASSERT_EQ(part.specs.size(), 5u);
  EXPECT_EQ(part.specs[0].shape, (Shape{4, 5}));
  EXPECT_EQ(part.specs[1].shape, (Shape{7}));
  EXPECT_EQ(part.specs[2].shape, (Shape{3, 4}));
  EXPECT_EQ(part.specs[3].shape, (Shape{4}));
  EXPECT_EQ(part.specs[4].shape, (Shape{2, 8}));
  EXPECT_EQ(part.offsets, (std::vector<int64_t>{0, 20, 27, 39, 43}));
  EXPECT_EQ(part.numel, 59);
}

// Every pair of sizes dividing 12, every part, the whole part and random
// element ranges of it (a ZeRO shard of the new part).
TEST(TensorParallelParts, PartsOfOneSizeCutIntoPartsOfAnotherAreThoseCutFromTheWhole) {
  const SplitGroup group = mixed_group();
  std::vector<int32_t> whole(static_cast<size_t>(group.whole.numel));
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = static_cast<int32_t>(1000 + i);
  std::mt19937 rng(7);
  for (int from_size : {1, 2, 3, 4, 6, 12})
    for (int size : {1, 2, 3, 4, 6, 12}) {
      std::vector<std::vector<int32_t>> old;
      std::vector<const char*> from;
      for (int t = 0; t < from_size; ++t)
        old.push_back(part_of(group, whole, t, from_size));
      for (const auto& part : old)
        from.push_back(reinterpret_cast<const char*>(part.data()));
      for (int rank = 0; rank < size; ++rank) {
        SCOPED_TRACE(std::to_string(from_size) + " -> part " + std::to_string(rank) + " of " +
                     std::to_string(size));
        const std::vector<int32_t> want = part_of(group, whole, rank, size);
        const int64_t n = static_cast<int64_t>(want.size());
        std::vector<std::pair<int64_t, int64_t>> ranges = {{0, n}, {0, 0}, {n - 1, n}};
        for (int k = 0; k < 8; ++k) {
          const int64_t a = std::uniform_int_distribution<int64_t>(0, n)(rng);
          const int64_t b = std::uniform_int_distribution<int64_t>(a, n)(rng);
          ranges.push_back({a, b});
        }
        for (const auto& [begin, end] : ranges) {
          std::vector<int32_t> got(static_cast<size_t>(end - begin), -1);
          copy_from_parts(group, from_size, from, rank, size, begin, end, sizeof(int32_t),
                          reinterpret_cast<char*>(got.data()));
          for (int64_t e = begin; e < end; ++e)
            ASSERT_EQ(got[static_cast<size_t>(e - begin)], want[static_cast<size_t>(e)])
                << "element " << e << " of [" << begin << ", " << end << ")";
        }
      }
    }
}

// The rule a checkpoint's reader relies on: a Transformer's split_group,
// even at parallel.tensor = 1, divided N ways is the layout of a rank of a
// parallel.tensor = N run (Qwen2's biases and tied head, Qwen3's q/k norms,
// LoRA's adapters on all seven projections).
TEST(TensorParallelParts, AModelsSplitGroupsDivideIntoATensorParallelRunsLayouts) {
  for (const bool qwen3 : {true, false}) {
    SCOPED_TRACE(qwen3 ? "qwen3" : "qwen2");
    ModelConfig config = testing::tiny_decoder(qwen3, !qwen3, !qwen3);
    config.vocab_size = 24;
    for (const bool lora : {false, true}) {
      Allocator allocator(make_virtual_source(), AllocatorOptions{AllocatorPolicy::kExact, 0});
      std::unique_ptr<Backend> backend = make_meta_backend(allocator);
      TransformerOptions options;
      if (lora) {
        options.lora.enabled = true;
        options.lora.rank = 2;
        options.lora.targets = {kLoraQ, kLoraK, kLoraV, kLoraO, kLoraGate, kLoraUp, kLoraDown};
      }
      Transformer model(*backend, config, options);
      for (int n : {1, 2}) {
        const std::vector<GroupLayout> want = transformer_layouts(config, options.lora, false, n);
        ASSERT_EQ(want.size(), model.layouts().size());
        for (size_t g = 0; g < want.size(); ++g) {
          const GroupLayout got = model.split_group(g).part_layout(n);
          SCOPED_TRACE(want[g].name + (lora ? " with LoRA" : "") + ", N = " + std::to_string(n));
          ASSERT_EQ(got.specs.size(), want[g].specs.size());
          for (size_t i = 0; i < got.specs.size(); ++i) {
            EXPECT_EQ(got.specs[i].name, want[g].specs[i].name);
            EXPECT_EQ(got.specs[i].shape, want[g].specs[i].shape) << got.specs[i].name;
          }
          EXPECT_EQ(got.offsets, want[g].offsets);
          EXPECT_EQ(got.trainable, want[g].trainable);
        }
      }
    }
  }
}

}  // namespace
}  // namespace headroom
