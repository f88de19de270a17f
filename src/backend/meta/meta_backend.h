// The meta backend: the plan's half of "plan = run" (DESIGN.md, promise 1).
//
// Every op runs the same check as cpu (backend/op_checks.h), then makes
// exactly the allocations cpu makes, in the same order, from its own
// allocator (over a virtual source), and computes nothing: tensor contents
// are never touched and meta addresses are never dereferenced. Each op lives
// in meta/<op>.cc beside its cpu twin's contract.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/gemm_plan.h"

namespace headroom {

class MetaBackend final : public Backend {
 public:
  explicit MetaBackend(Allocator& allocator) : Backend(allocator) {}
  BackendKind kind() const override { return BackendKind::kMeta; }

  void fill(Tensor& x, float value) override;
  void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) override;
  void copy(const Tensor& src, Tensor& dst) override;
  Tensor cast(const Tensor& x, DType dtype, Category category, std::string_view tag) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
            float alpha, float beta) override;

 private:
  // The descriptors cpu would execute, asked of oneDNN on this machine, so
  // gemm's route and scratchpad size are cpu's; primitives are never made.
  GemmPlans gemm_plans_;
};

}  // namespace headroom
