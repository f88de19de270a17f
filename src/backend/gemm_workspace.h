// The workspace rules of a target device for gemm: what one gemm call holds
// besides its operands. The front (backend.h) asks its target's rules before
// it calls a kernel, and meta asks the same rules, so a plan follows the
// device the run will use and never the planning machine (target_device.h).
//
//   host cpu  oneDNN's answer on this host (cpu/gemm_plan.h): the route
//             (native, or bf16 widened into fp32 copies) and the scratchpad,
//             per call, freed on return; the fp32 copy of a shared operand
//             (Backend::share_gemm_operand) made once and held until unshared.
//   cuda      cuBLASLt's: one workspace per backend, allocated on the first
//             gemm and held for the backend's life; nothing per call.
// Every other op's scratch is a pure function of its shapes, the same on
// every device (the *_checks.h files), and the front allocates it directly.
#pragma once

#include <memory>

#include "backend/common/gemm_key.h"
#include "backend/target_device.h"
#include "tensor/tensor.h"

namespace headroom {

class Backend;
struct GemmPlan;

// What one gemm call holds while it runs; the members a target does not use
// stay empty. Tensors are freed in reverse declaration order when this goes
// out of scope.
struct GemmScratch {
  // host cpu: the oneDNN plan this call executes (owned by the rules).
  GemmPlan* cpu_plan = nullptr;
  Tensor a_fp32;  // widened route: A as stored, in fp32       (tag gemm.a_fp32)
  Tensor b_fp32;  // widened route: B as stored, in fp32       (tag gemm.b_fp32)
  // Widened route: a_fp32 / b_fp32 already hold A's / B's values, widened by
  // an earlier gemm of a shared operand (Backend::share_gemm_operand); the
  // kernel widens only the copies that are not ready.
  bool a_fp32_ready = false;
  bool b_fp32_ready = false;
  Tensor c_fp32;      // widened route, bf16 C: unrounded result   (tag gemm.c_fp32)
  Tensor scratchpad;  // oneDNN's scratchpad, when it asks for one (tag gemm.scratchpad)
  // cuda: the backend's cuBLASLt workspace (tag cublaslt.workspace), not owned.
  const Tensor* cublaslt_workspace = nullptr;
};

class GemmWorkspace {
 public:
  virtual ~GemmWorkspace() = default;
  // Allocates from `backend`, in order, what one gemm of `key` over a, b, c
  // holds on this target. Called after the front's shape checks.
  virtual GemmScratch allocate(const Backend& backend, const GemmKey& key, const Tensor& a,
                               const Tensor& b, const Tensor& c) = 0;
  // Backend::share_gemm_operand's rule: between share(x) and unshare(x) this
  // target's gemms may convert x once for all of them. Default: a target
  // that converts nothing has nothing to share. Shares of different tensors
  // nest; x is compared by address, dtype and shape.
  virtual void share(const Tensor& operand) { (void)operand; }
  virtual void unshare(const Tensor& operand) { (void)operand; }
};

// cuBLASLt's rule: `bytes` once, on the first call, held until destruction.
std::unique_ptr<GemmWorkspace> make_cuda_gemm_workspace(uint64_t bytes = kCublasLtWorkspaceBytes);
// oneDNN's rule on this host (defined in cpu/gemm_plan.cc).
std::unique_ptr<GemmWorkspace> make_host_cpu_gemm_workspace();

}  // namespace headroom
