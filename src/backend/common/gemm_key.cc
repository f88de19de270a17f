#include "backend/common/gemm_key.h"

#include <bit>

namespace headroom {

GemmKey make_gemm_key(const GemmDims& dims, bool transpose_a, bool transpose_b, DType ab, DType c,
                      float alpha, float beta) {
  GemmKey key;
  key.m = dims.m;
  key.n = dims.n;
  key.k = dims.k;
  key.transpose_a = transpose_a;
  key.transpose_b = transpose_b;
  key.ab = ab;
  key.c = c;
  key.alpha_bits = std::bit_cast<uint32_t>(alpha);
  key.beta_bits = std::bit_cast<uint32_t>(beta);
  return key;
}

float alpha_of(const GemmKey& key) {
  return std::bit_cast<float>(key.alpha_bits);
}
float beta_of(const GemmKey& key) {
  return std::bit_cast<float>(key.beta_bits);
}

std::string to_string(const GemmKey& key) {
  return "m=" + std::to_string(key.m) + " n=" + std::to_string(key.n) +
         " k=" + std::to_string(key.k) + (key.transpose_a ? " A^T" : " A") +
         (key.transpose_b ? " B^T" : " B") + " " + std::string(name_of(key.ab)) + " x " +
         std::string(name_of(key.ab)) + " -> " + std::string(name_of(key.c)) +
         " alpha=" + std::to_string(alpha_of(key)) + " beta=" + std::to_string(beta_of(key));
}

}  // namespace headroom
