// Tensor parallelism of the decoder's blocks (model/tensor_parallel.h): the
// split rule and layouts here, and the numbers of a real group under mpirun
// (tensor_parallel_ranks.cc: every rank against the whole model trained
// alone).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "model/layouts.h"
#include "model/tensor_parallel.h"
#include "test_util/source_tree.h"

namespace headroom {
namespace {

ModelConfig qwen3_like() {
  ModelConfig c;
  c.name = "test";
  c.vocab_size = 20;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 1;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.attention_bias = true;
  return c;
}

TEST(TensorParallel, AnIndivisibleCountNamesTheModelsKeyAndParallelTensor) {
  const ModelConfig c = qwen3_like();
  EXPECT_EQ(tensor_parallel_problem(c, 1), "");
  EXPECT_EQ(tensor_parallel_problem(c, 2), "");
  EXPECT_EQ(tensor_parallel_problem(c, 4),
            "the model's num_key_value_heads = 2 is not a multiple of parallel.tensor = 4 (each "
            "tensor-parallel rank holds an equal part)");
  EXPECT_NE(tensor_parallel_problem(c, 3).find("num_attention_heads = 8"), std::string::npos);
  EXPECT_NE(tensor_parallel_problem(c, 0).find("is not >= 1"), std::string::npos);
  ModelConfig odd_vocabulary = c;
  odd_vocabulary.vocab_size = 19;
  EXPECT_NE(tensor_parallel_problem(odd_vocabulary, 2).find("vocab_size = 19"), std::string::npos);
}

TEST(TensorParallel, ARanksBlockHoldsItsRowsOfColumnParallelAndColumnsOfRowParallel) {
  const ModelConfig c = qwen3_like();
  const GroupLayout block = transformer_layouts(c, {}, false, 2)[1];
  auto shape = [&](const std::string& name) {
    return block.specs[static_cast<size_t>(block.find("model.layers.0." + name))].shape;
  };
  EXPECT_EQ(shape("self_attn.q_proj.weight"), (Shape{16, 16}));  // (H/2 * D, C)
  EXPECT_EQ(shape("self_attn.k_proj.weight"), (Shape{4, 16}));   // (KV/2 * D, C)
  EXPECT_EQ(shape("self_attn.o_proj.weight"), (Shape{16, 16}));  // (C, H/2 * D)
  EXPECT_EQ(shape("mlp.gate_proj.weight"), (Shape{12, 16}));     // (F/2, C)
  EXPECT_EQ(shape("mlp.down_proj.weight"), (Shape{16, 12}));     // (C, F/2)
  EXPECT_EQ(shape("self_attn.v_proj.bias"), (Shape{4}));
  EXPECT_EQ(shape("input_layernorm.weight"), (Shape{16}));  // replicated
  // The embedding and the (untied) head by vocabulary rows.
  EXPECT_EQ(transformer_layouts(c, {}, false, 2)[0].specs[0].shape, (Shape{10, 16}));
  EXPECT_EQ(transformer_layouts(c, {}, false, 2)[2].specs[1].shape, (Shape{10, 16}));
  EXPECT_EQ(transformer_layouts(c, {}, false, 2)[2].specs[0].shape, (Shape{16}));  // final norm
  EXPECT_TRUE(splits_output_rows(kLoraV));
  EXPECT_FALSE(splits_output_rows(kLoraDown));
  EXPECT_EQ(tensor_parallel_part(24, 1, 2), (std::pair<int64_t, int64_t>{12, 24}));
}

std::string run(const std::string& command, int* code) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::array<char, 4096> buffer{};
  while (pipe && std::fgets(buffer.data(), buffer.size(), pipe))
    out += buffer.data();
  const int status = pipe ? pclose(pipe) : -1;
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class TensorParallelGroup : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallelGroup, TrainsAsTheWholeModelTrainsAlone) {
  // One OpenMP thread per rank; LeakSanitizer off for Open MPI's own
  // allocations (as tests/cli/mpi_test.cc).
  const std::string command =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 540 mpirun "
      "--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x "
      "ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 -np " +
      std::to_string(GetParam()) + " '" + testing::binary_dir() +
      "/tests/model/tensor_parallel_ranks'";
  int code = -1;
  const std::string out = run(command, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ok"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallelGroup, ::testing::Values(2, 4));

}  // namespace
}  // namespace headroom
