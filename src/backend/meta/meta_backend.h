// The meta backend: the plan's half of "plan = run" (DESIGN.md, promise 1).
//
// Every op runs the same check as cpu (backend/op_checks.h), then makes
// exactly the allocations cpu makes, in the same order, from its own
// allocator (over a virtual source), and computes nothing: tensor contents
// are never touched and meta addresses are never dereferenced. Each op lives
// in meta/<op>.cc beside its cpu twin's contract. With target kCuda, gemm
// makes cuBLASLt's allocations instead of oneDNN's (backend/target_device.h).
#pragma once

#include "backend/backend.h"
#include "backend/cpu/gemm_plan.h"

namespace headroom {

class MetaBackend final : public Backend {
 public:
  explicit MetaBackend(Allocator& allocator, TargetDevice target = TargetDevice::kHostCpu)
      : Backend(allocator), target_(target) {}
  TargetDevice target() const { return target_; }
  BackendKind kind() const override { return BackendKind::kMeta; }

  void fill(Tensor& x, float value) override;
  void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) override;
  void copy(const Tensor& src, Tensor& dst) override;
  Tensor cast(const Tensor& x, DType dtype, Category category, std::string_view tag) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) override;
  void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
            float alpha, float beta) override;

  void copy_from_host(const void* src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void scale(Tensor& x, float alpha) override;
  void sum_squares(const Tensor& x, Tensor& out) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table) override;
  void rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                       Tensor& rstd) override;
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                        Tensor& dx, Tensor& dw) override;
  void rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) override;
  void rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim, float theta) override;
  void bias_forward(Tensor& x, const Tensor& bias) override;
  void bias_backward(const Tensor& dy, Tensor& d_bias) override;
  void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up, Tensor& d_gate,
                       Tensor& d_up) override;
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                         Tensor& out, Tensor& lse) override;
  void attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& out, const Tensor& lse,
                          const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                          Tensor& dq, Tensor& dk, Tensor& dv) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                             Tensor& loss_sum) override;
  void cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                              float scale) override;
  void adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWParams& params) override;

 private:
  TargetDevice target_;
  // kCuda: cuBLASLt's workspace, from the first gemm on.
  Tensor cublaslt_workspace_;
  // The descriptors cpu would execute, asked of oneDNN on this machine, so
  // gemm's route and scratchpad size are cpu's; primitives are never made.
  GemmPlans gemm_plans_;
};

}  // namespace headroom
