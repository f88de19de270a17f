#include "backend/op.h"

namespace headroom {

std::string_view name_of(Op op) {
  switch (op) {
    case Op::kFill:
      return "fill";
    case Op::kFillUniform:
      return "fill_uniform";
    case Op::kCopy:
      return "copy";
    case Op::kCast:
      return "cast";
    case Op::kAdd:
      return "add";
    case Op::kDropout:
      return "dropout";
    case Op::kGemm:
      return "gemm";
    case Op::kGemmBias:
      return "gemm_bias";
    case Op::kCopyFromHost:
      return "copy_from_host";
    case Op::kCopyToHost:
      return "copy_to_host";
    case Op::kScale:
      return "scale";
    case Op::kSumSquares:
      return "sum_squares";
    case Op::kEmbeddingForward:
      return "embedding_forward";
    case Op::kEmbeddingBackward:
      return "embedding_backward";
    case Op::kRmsnormForward:
      return "rmsnorm_forward";
    case Op::kRmsnormBackward:
      return "rmsnorm_backward";
    case Op::kRopeForward:
      return "rope_forward";
    case Op::kRopeBackward:
      return "rope_backward";
    case Op::kBiasForward:
      return "bias_forward";
    case Op::kBiasBackward:
      return "bias_backward";
    case Op::kSwigluForward:
      return "swiglu_forward";
    case Op::kSwigluBackward:
      return "swiglu_backward";
    case Op::kAttentionForward:
      return "attention_forward";
    case Op::kAttentionBackward:
      return "attention_backward";
    case Op::kDenseAttentionMask:
      return "dense_attention_mask";
    case Op::kDenseAttentionForward:
      return "dense_attention_forward";
    case Op::kDenseAttentionBackward:
      return "dense_attention_backward";
    case Op::kCrossEntropyForward:
      return "cross_entropy_forward";
    case Op::kCrossEntropyBackward:
      return "cross_entropy_backward";
    case Op::kAdamwUpdate:
      return "adamw_update";
    case Op::kAdamw8bitUpdate:
      return "adamw8bit_update";
    case Op::kNf4Quantize:
      return "nf4_quantize";
    case Op::kNf4Dequantize:
      return "nf4_dequantize";
  }
  return "?";
}

std::array<Op, kOpCount> all_ops() {
  std::array<Op, kOpCount> ops{};
  for (int i = 0; i < kOpCount; ++i)
    ops[static_cast<size_t>(i)] = static_cast<Op>(i);
  return ops;
}

}  // namespace headroom
