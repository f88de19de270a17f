// How the cpu backend runs a gemm of one shape on this machine, decided once
// per shape from oneDNN's answer, and the scratch memory one call holds.
//
// meta includes this file on purpose: it asks oneDNN the same question (same
// primitive descriptor, hence the same route and scratchpad size) and
// allocates the same GemmScratch, so a plan matches a cpu run byte for byte.
// Both must run on the same machine and thread count: oneDNN chooses its
// implementation, and with it the scratchpad, by CPU ISA and threads.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/backend.h"
#include "backend/op_checks.h"

namespace headroom {

// Everything a oneDNN matmul primitive is specialized on. alpha and beta are
// baked into the primitive (output scale, sum post-op), so they are part of
// the key; they are kept as bit patterns so the ordering is total.
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

enum class GemmRoute : uint8_t {
  kNothing,  // m or n is 0: C is empty, nothing to do
  kScale,    // k is 0: C = beta * C (exactly 0 when beta = 0); oneDNN is not called
  kNative,   // one oneDNN matmul on the operands as they are
  // bf16 operands on a CPU oneDNN has no bf16 matmul for (no AVX-512): A and B
  // are widened into fp32 workspace copies (exact), multiplied in fp32, and a
  // bf16 C goes through an fp32 copy rounded once at the end. Same math as
  // kNative, whose bf16 kernels also accumulate in fp32; more memory, which
  // is therefore allocated and accounted like any other.
  kWidened,
};

struct GemmPlan {
  GemmKey key;
  GemmRoute route = GemmRoute::kNothing;
  // kNative / kWidened: fp32 operands for kWidened. Its memory descriptors
  // express the transposes as strides over the tensors as stored: no copies.
  dnnl::matmul::primitive_desc descriptor;
  uint64_t scratchpad_bytes = 0;
  // Made from `descriptor` the first time cpu executes the plan (JIT code
  // generation costs milliseconds); meta never makes it.
  dnnl::matmul primitive;
};

// Plans by key, made on first use and kept for the backend's lifetime.
class GemmPlans {
 public:
  GemmPlans();
  GemmPlans(const GemmPlans&) = delete;
  GemmPlans& operator=(const GemmPlans&) = delete;

  // The plan for `key`; references stay valid for this object's lifetime.
  GemmPlan& get(const GemmKey& key);
  // The scratchpad a cpu gemm of `key` allocates (0: none), from the same
  // cached descriptor cpu executes.
  uint64_t scratchpad_bytes(const GemmKey& key) { return get(key).scratchpad_bytes; }
  // The executable primitive of a kNative / kWidened plan, made once.
  const dnnl::matmul& primitive(GemmPlan& plan);
  const dnnl::engine& engine() const { return engine_; }
  size_t size() const { return plans_.size(); }

 private:
  dnnl::engine engine_;
  std::map<GemmKey, GemmPlan> plans_;
};

// The workspace one gemm call holds while it runs. allocate_gemm_scratch
// allocates the members in declaration order and they are freed in reverse
// when the struct goes out of scope, on cpu and meta alike.
struct GemmScratch {
  Tensor a_fp32;      // kWidened: A as stored, widened           (tag gemm.a_fp32)
  Tensor b_fp32;      // kWidened: B as stored, widened           (tag gemm.b_fp32)
  Tensor c_fp32;      // kWidened with a bf16 C: unrounded result (tag gemm.c_fp32)
  Tensor scratchpad;  // oneDNN's scratchpad, when it asks for one (tag gemm.scratchpad)
};
GemmScratch allocate_gemm_scratch(const Backend& backend, const GemmPlan& plan, const Tensor& a,
                                  const Tensor& b, const Tensor& c);

}  // namespace headroom
