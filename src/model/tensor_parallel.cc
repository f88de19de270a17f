#include "model/tensor_parallel.h"

#include "util/error.h"

namespace headroom {

std::string tensor_parallel_problem(const ModelConfig& config, int size) {
  if (size < 1) return "parallel.tensor = " + std::to_string(size) + " is not >= 1";
  const std::pair<const char*, int64_t> split[] = {
      {"num_attention_heads", config.num_heads},
      {"num_key_value_heads", config.num_kv_heads},
      {"intermediate_size", config.intermediate_size},
      {"vocab_size", config.vocab_size},
  };
  for (const auto& [key, n] : split)
    if (n % size != 0)
      return "the model's " + std::string(key) + " = " + std::to_string(n) +
             " is not a multiple of parallel.tensor = " + std::to_string(size) +
             " (each tensor-parallel rank holds an equal part)";
  return "";
}

bool splits_output_rows(LoraTarget t) {
  return t != kLoraO && t != kLoraDown;
}

std::pair<int64_t, int64_t> tensor_parallel_part(int64_t n, int rank, int size) {
  HR_CHECK(size >= 1 && rank >= 0 && rank < size && n % size == 0,
           "tensor_parallel_part: " + std::to_string(n) + " over " + std::to_string(size) +
               " ranks, rank " + std::to_string(rank));
  const int64_t part = n / size;
  return {rank * part, (rank + 1) * part};
}

}  // namespace headroom
