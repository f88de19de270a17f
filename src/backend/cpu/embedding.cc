// embedding_forward: out[t, :] = table[ids[t], :]; table (V, C) fp32 or bf16,
// ids (T) int32, out (T, C) table's dtype. A pure copy: exact in any dtype.
// embedding_backward: d_table[v, :] += sum of d_out[t, :] over the t with
// ids[t] == v, for every v in ids; d_table (V, C) d_out's dtype, accumulated.
//
// Id -1 is a token another rank's part of a vocabulary-parallel table holds
// (model/tensor_parallel.h): a zero row in forward, nothing in backward. Any
// other id outside [0, V) is an InternalError naming it and its position;
// cpu checks every id before it writes or allocates anything. (Meta cannot:
// a plan has no token values. The data layer validates them first.)
//
// Backward sums the rows of a repeated token in fp32, in token order, and adds
// the sum to d_table once: one rounding per d_table element per call, however
// often the token occurs (a bf16 table would lose a frequent token's small
// gradients if each were rounded in on its own). To find the repeats it sorts
// the token indices by (id, index) into a workspace tensor of T int32. Then
// each thread owns a block of columns and walks all tokens in that order, so
// no two threads ever write one element and the sums are the same bits for
// any thread count.
// Allocates: backward only, the order, int32 (T), category workspace, tag
// "embedding_backward.order", freed before it returns.
#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <string>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"
#include "backend/op_checks.h"
#include "util/error.h"

namespace headroom {

namespace {

// Columns per thread task in backward: 64 fp32 accumulators stay in registers
// or L1, and C = 4096 still splits into 64 tasks.
constexpr int64_t kColumnBlock = 64;

void check_ids(std::string_view op, const Tensor& ids, int64_t vocab, const Tensor& table,
               std::string_view table_role) {
  const int32_t* id = ids.data<int32_t>();
  for (int64_t t = 0; t < ids.numel(); ++t)
    if (id[t] < -1 || id[t] >= vocab)
      throw InternalError(std::string(op) + ": ids " + describe_operand(ids) + " holds " +
                          std::to_string(id[t]) + " at [" + std::to_string(t) + "], outside [0, " +
                          std::to_string(vocab) + ") of " + std::string(table_role) + " " +
                          describe_operand(table) + " (-1 marks another rank's token)");
}

template <typename T>
void gather_rows(const T* table, const int32_t* ids, T* out, int64_t tokens, int64_t width) {
  size_t row_bytes = static_cast<size_t>(width) * sizeof(T);
#pragma omp parallel for schedule(static) if (tokens * width >= kMinParallelElements)
  for (int64_t t = 0; t < tokens; ++t) {
    if (ids[t] == -1)
      std::fill_n(out + t * width, width, T{});
    else
      std::memcpy(out + t * width, table + static_cast<int64_t>(ids[t]) * width, row_bytes);
  }
}

// `order` holds the token indices sorted by (id, index).
template <typename T>
void scatter_add_rows(const T* d_out, const int32_t* ids, const int32_t* order, T* d_table,
                      int64_t tokens, int64_t width) {
  int64_t blocks = (width + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (tokens * width >= kMinParallelElements)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t c0 = b * kColumnBlock;
    int64_t n = std::min(kColumnBlock, width - c0);
    int64_t k = 0;
    // Id -1 (another rank's) sorts first and adds nothing.
    while (k < tokens && ids[order[k]] == -1)
      ++k;
    while (k < tokens) {
      int32_t id = ids[order[k]];
      std::array<float, kColumnBlock> sum{};
      for (; k < tokens && ids[order[k]] == id; ++k) {
        const T* row = d_out + static_cast<int64_t>(order[k]) * width + c0;
        for (int64_t c = 0; c < n; ++c)
          sum[c] += widen(row[c]);
      }
      T* target = d_table + static_cast<int64_t>(id) * width + c0;
      for (int64_t c = 0; c < n; ++c)
        store(target + c, widen(target[c]) + sum[c]);
    }
  }
}

}  // namespace

void CpuKernels::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_ids("embedding_forward", ids, table.size(0), table, "table");
  int64_t tokens = ids.size(0), width = table.size(1);
  with_floating_type(table.dtype(), [&]<typename T>(T*) {
    gather_rows(table.data<T>(), ids.data<int32_t>(), out.data<T>(), tokens, width);
  });
}

void CpuKernels::embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table,
                                    Tensor& order_tensor) {
  check_ids("embedding_backward", ids, d_table.size(0), d_table, "d_table");
  int64_t tokens = ids.size(0), width = d_table.size(1);
  const int32_t* id = ids.data<int32_t>();
  int32_t* order = order_tensor.data<int32_t>();
  std::iota(order, order + tokens, 0);
  // Ties broken by index: the order, and so every sum, is unique.
  std::sort(order, order + tokens,
            [id](int32_t a, int32_t b) { return id[a] != id[b] ? id[a] < id[b] : a < b; });
  with_floating_type(d_table.dtype(), [&]<typename T>(T*) {
    scatter_add_rows(d_out.data<T>(), id, order, d_table.data<T>(), tokens, width);
  });
}

}  // namespace headroom
