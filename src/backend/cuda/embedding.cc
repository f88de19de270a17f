// embedding on cuda, the kernels of cuda/embedding.cu on the backend's
// stream, fp32, bf16 or fp16:
// embedding_forward: out[t, :] = table[ids[t], :], a pure copy (exact).
// embedding_backward: d_table[v, :] += the fp32 sum, in token order, of the
// d_out rows of the tokens with id v, rounded once: cpu/embedding.cc's bits.
// `order` (the front's int32 (T) scratch) receives the token indices sorted
// by (id, index) by a bitonic sort in place (no other scratch); each run of
// one id is then summed by columns, one thread per element, so the result is
// deterministic.
// Ids outside [0, V) are not reported here as cpu reports them (that would
// need a copy back and a synchronize per call): forward writes such a row as
// NaN, so the loss is NaN; backward adds nothing for it. The data layer
// validates ids before they reach a kernel.
// Allocates: nothing (order is the front's).
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_rows.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

void CudaKernels::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int64_t vocab = table.size(0), width = table.size(1), tokens = ids.size(0);
  if (tokens == 0 || width == 0) return;
  const int32_t* id = ids.data<int32_t>();
  switch (table.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::embedding_forward_f32(table.data<float>(), vocab, width, id, tokens,
                                                out.data<float>(), stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::embedding_forward_bf16(bits16(table), vocab, width, id, tokens,
                                                 bits16(out), stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::embedding_forward_f16(bits16(table), vocab, width, id, tokens,
                                                bits16(out), stream()));
      return;
    default:
      refuse_cuda_dtype("embedding_forward", table.dtype());
  }
}

void CudaKernels::embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table,
                                     Tensor& order) {
  const int64_t vocab = d_table.size(0), width = d_table.size(1), tokens = ids.size(0);
  if (tokens == 0) return;
  const int32_t* id = ids.data<int32_t>();
  int32_t* sorted = order.data<int32_t>();
  switch (d_table.dtype()) {
    case DType::kF32:
      HR_CUDA_CHECK(cuda::embedding_backward_f32(d_out.data<float>(), id, tokens, width,
                                                 d_table.data<float>(), vocab, sorted, stream()));
      return;
    case DType::kBF16:
      HR_CUDA_CHECK(cuda::embedding_backward_bf16(bits16(d_out), id, tokens, width, bits16(d_table),
                                                  vocab, sorted, stream()));
      return;
    case DType::kF16:
      HR_CUDA_CHECK(cuda::embedding_backward_f16(bits16(d_out), id, tokens, width, bits16(d_table),
                                                 vocab, sorted, stream()));
      return;
    default:
      refuse_cuda_dtype("embedding_backward", d_table.dtype());
  }
}

}  // namespace headroom
