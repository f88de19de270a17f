// Block-sparse flash attention on cuda, the kernels of
// cuda/flash_attention_forward.cu and cuda/flash_attention_backward.cu on the
// backend's stream (cpu/attention.cc's op, kernels.h's contract):
// attention_forward: out (T, H*D) in q's dtype and lse (H, T) fp32 from q
//   (T, H*D), k, v (T, KV*D), over each query's visible keys (the mask of
//   dims.mask and cu_seqlens, attention_mask.h); GQA head h reads kv head
//   h / (H / KV).
// attention_backward: scratch.delta = rowsum(d_out * out) first, then dq, dk,
//   dv written (dk, dv summed over each kv head's query heads).
// fp32, bf16 and fp16; head_dim 64 or 128 (others refused). SIMT kernels
// (fp32 FMA on CUDA cores, not tensor cores) with fixed kernel tiles (64 x 32
// forward, 32 x 32 backward) whatever params.block_size is: they walk the
// keys of each query tile's visible union, computed on device from the
// document offsets, which cu_seqlens (host memory) passes by value in chunks
// of 511 documents (documents never see each other; causal, which ignores
// them, is one chunk).
// Numerics: fp32 math, operands widened exactly, one rounding on store, the
// cpu's formulas; sums in another order and expf / logf instead of the cpu's
// exp_approx (rounding-level). Deterministic: no atomics, each output element
// owned by one thread, fixed order.
// Allocates: nothing (backward's delta is the front's attention.delta).
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_dtype.h"
#include "backend/cuda/cuda_kernels.h"
#include "kernels_flash_attention.h"  // cuda/: the kernels themselves
#include "util/error.h"

namespace headroom {

namespace {

// The kernels' dtype, head_dim and grid limits; a UsageError naming `op`
// otherwise.
cuda::FloatType flash_type(const char* op, const Tensor& q, const AttentionDims& dims) {
  if (!cuda::flash_attention_head_dim_supported(dims.head_dim))
    throw UsageError(std::string("cuda ") + op + ": no cuda kernel for head_dim " +
                     std::to_string(dims.head_dim) +
                     " yet (64 and 128 are compiled; run it on run.backend = \"cpu\")");
  if (dims.heads > 65535)  // grid.y
    throw UsageError(std::string("cuda ") + op + ": " + std::to_string(dims.heads) +
                     " heads is more than the kernels' grid allows (65535)");
  return float_type_of(op, q.dtype());
}

cuda::FlashDims flash_dims(const AttentionDims& dims, const AttentionParams& params) {
  cuda::FlashDims d;
  d.tokens = dims.tokens;
  d.heads = dims.heads;
  d.kv_heads = dims.kv_heads;
  d.head_dim = dims.head_dim;
  d.scale = params.scale;
  d.mask = dims.mask;
  return d;
}

int64_t documents_of(const std::vector<int32_t>& cu_seqlens) {
  return static_cast<int64_t>(cu_seqlens.size()) - 1;  // check_cu_seqlens: size >= 1
}

}  // namespace

void CudaKernels::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::vector<int32_t>& cu_seqlens,
                                    const AttentionParams& params, const AttentionDims& dims,
                                    Tensor& out, Tensor& lse) {
  const cuda::FloatType type = flash_type("attention_forward", q, dims);
  if (dims.tokens == 0) return;
  HR_CUDA_CHECK(cuda::flash_attention_forward(q.raw(), k.raw(), v.raw(), cu_seqlens.data(),
                                              documents_of(cu_seqlens), flash_dims(dims, params),
                                              type, out.raw(), lse.data<float>(), stream()));
}

void CudaKernels::attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const std::vector<int32_t>& cu_seqlens,
                                     const AttentionParams& params, const AttentionDims& dims,
                                     AttentionBackwardScratch& scratch, Tensor& dq, Tensor& dk,
                                     Tensor& dv) {
  const cuda::FloatType type = flash_type("attention_backward", q, dims);
  if (dims.tokens == 0) return;
  const cuda::FlashDims d = flash_dims(dims, params);
  float* delta = scratch.delta.data<float>();
  // delta first: every dq and dk / dv tile reads it (same stream, so ordered).
  HR_CUDA_CHECK(cuda::flash_attention_delta(d_out.raw(), out.raw(), d, type, delta, stream()));
  HR_CUDA_CHECK(cuda::flash_attention_backward(
      d_out.raw(), q.raw(), k.raw(), v.raw(), lse.data<float>(), delta, cu_seqlens.data(),
      documents_of(cu_seqlens), d, type, dq.raw(), dk.raw(), dv.raw(), stream()));
}

}  // namespace headroom
