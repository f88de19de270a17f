// The ops of the backend front (backend/backend.h), one name each, so that a
// device's kernel table can say which it runs (Backend::supports) and a test
// harness can walk them all.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace headroom {

enum class Op : uint8_t {
  kFill,
  kFillUniform,
  kCopy,
  kCast,
  kAdd,
  kDropout,
  kGemm,
  kGemmBias,
  kCopyFromHost,
  kCopyToHost,
  kScale,
  kSumSquares,
  kEmbeddingForward,
  kEmbeddingBackward,
  kRmsnormForward,
  kRmsnormBackward,
  kRopeForward,
  kRopeBackward,
  kBiasForward,
  kBiasBackward,
  kSwigluForward,
  kSwigluBackward,
  kAttentionForward,
  kAttentionBackward,
  kDenseAttentionMask,
  kDenseAttentionForward,
  kDenseAttentionBackward,
  kCrossEntropyForward,
  kCrossEntropyBackward,
  kAdamwUpdate,
  kAdamw8bitUpdate,
  kNf4Quantize,
  kNf4Dequantize,
};
inline constexpr int kOpCount = static_cast<int>(Op::kNf4Dequantize) + 1;

// The method's name on Backend: "fill", "attention_backward", ...
std::string_view name_of(Op op);

// Every op, in declaration order.
std::array<Op, kOpCount> all_ops();

}  // namespace headroom
