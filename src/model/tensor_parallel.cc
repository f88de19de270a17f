#include "model/tensor_parallel.h"

#include <algorithm>
#include <cstring>

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

GroupLayout SplitGroup::part_layout(int size) const {
  HR_CHECK(split_dims.size() == whole.specs.size(),
           "SplitGroup " + whole.name + ": a dimension per spec");
  std::vector<ParamSpec> specs = whole.specs;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (split_dims[i] < 0) continue;
    int64_t& n = specs[i].shape[static_cast<size_t>(split_dims[i])];
    HR_CHECK(n % size == 0, specs[i].name + ": " + std::to_string(n) + " does not split " +
                                std::to_string(size) + " ways");
    n /= size;
  }
  GroupLayout part = GroupLayout::make(whole.name, std::move(specs));
  part.trainable = whole.trainable;
  return part;
}

void copy_from_parts(const SplitGroup& group, int from_size, std::span<const char* const> from,
                     int rank, int size, int64_t begin, int64_t end, size_t element, char* out) {
  HR_CHECK(static_cast<int>(from.size()) == from_size, "copy_from_parts: a buffer per part");
  const GroupLayout to = group.part_layout(size), old = group.part_layout(from_size);
  HR_CHECK(begin >= 0 && begin <= end && end <= to.numel, "copy_from_parts: elements in range");
  for (size_t i = 0; i < to.specs.size(); ++i) {
    const Shape& shape = to.specs[i].shape;  // this part's
    const int64_t at = to.offsets[i], n = numel_of(shape);
    const int64_t lo = std::max(begin, at), hi = std::min(end, at + n);
    if (lo >= hi) continue;
    const int dim = group.split_dims[i];
    const int64_t cols = shape.size() > 1 ? numel_of(shape) / shape[0] : 1;
    // Runs of values contiguous in both layouts: a row split's run ends where
    // the whole tensor's rows pass from one old part to the next, a column
    // split's at a row's end or where its columns do.
    for (int64_t e = lo - at; e < hi - at;) {
      const int64_t row = e / cols, col = e % cols;
      int64_t part = 0, old_row = row, old_col = col, old_cols = cols, run = n - e;
      if (dim == 0) {
        const int64_t whole_row = rank * shape[0] + row, old_rows = shape[0] * size / from_size;
        part = whole_row / old_rows;
        old_row = whole_row % old_rows;
        run = (old_rows - old_row) * cols - col;
      } else if (dim == 1) {
        run = cols - col;
        const int64_t whole_col = rank * cols + col;
        old_cols = cols * size / from_size;
        part = whole_col / old_cols;
        old_col = whole_col % old_cols;
        run = std::min(run, old_cols - old_col);
      }
      run = std::min(run, hi - at - e);
      const int64_t source = old.offsets[i] + old_row * old_cols + old_col;
      std::memcpy(out + static_cast<size_t>(at + e - begin) * element,
                  from[static_cast<size_t>(part)] + static_cast<size_t>(source) * element,
                  static_cast<size_t>(run) * element);
      e += run;
    }
  }
}

}  // namespace headroom
