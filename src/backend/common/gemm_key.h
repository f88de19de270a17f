// The identity of one gemm: everything a device's kernel (and its
// workspace) is specialized on. Device-neutral: the cpu plans one oneDNN
// primitive per key; a cuda table would pick one cuBLASLt algorithm per key.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "backend/op_checks.h"
#include "tensor/dtype.h"

namespace headroom {

// alpha and beta are baked into oneDNN's primitive (output scale, sum
// post-op), so they are part of the key; they are kept as bit patterns so the
// ordering is total.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  DType ab = DType::kF32;  // dtype of A and B
  DType c = DType::kF32;
  uint32_t alpha_bits = 0, beta_bits = 0;
  auto operator<=>(const GemmKey&) const = default;
};
GemmKey make_gemm_key(const GemmDims& dims, bool transpose_a, bool transpose_b, DType ab, DType c,
                      float alpha, float beta);
float alpha_of(const GemmKey& key);
float beta_of(const GemmKey& key);
// "m=4 n=5 k=6 A B^T bf16 x bf16 -> fp32 alpha=1.000000 beta=0.000000", for errors.
std::string to_string(const GemmKey& key);

}  // namespace headroom
