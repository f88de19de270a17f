// The cpu backend: OpenMP loops for elementwise ops, oneDNN for gemm.
// Each op is defined in its own file (cpu/<op>.cc) with its contract on top.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/gemm_plan.h"

namespace headroom {

// Elementwise loops shorter than this run on one thread: forking the OpenMP
// team costs microseconds, more than 32K elements take to touch. The result
// never depends on the thread count, only the speed does.
inline constexpr int64_t kMinParallelElements = int64_t{1} << 15;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(Allocator& allocator) : Backend(allocator) {}
  BackendKind kind() const override { return BackendKind::kCpu; }

  void fill(Tensor& x, float value) override;
  void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) override;
  void copy(const Tensor& src, Tensor& dst) override;
  Tensor cast(const Tensor& x, DType dtype, Category category, std::string_view tag) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
            float alpha, float beta) override;

 private:
  GemmPlans gemm_plans_;
  dnnl::stream stream_{gemm_plans_.engine()};
};

}  // namespace headroom
