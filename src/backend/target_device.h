// The device a plan is made for. meta makes the allocations of that
// device's kernels, so a plan of a cuda run follows the GPU's rules and
// never the planning machine's: the same events on every host.
//
// What differs between the targets today is the GEMM's memory:
//   kHostCpu  the cpu backend's: oneDNN's answer on this host (its route,
//             which widens bf16 operands into fp32 copies on CPUs without
//             native bf16 matmul, and its scratchpad). A cpu run can only
//             run on the host it is planned on, so asking the host is right.
//   kCuda     cuBLASLt's: one workspace per backend, taken from headroom's
//             allocator on the first gemm and held for the backend's life
//             (as PyTorch holds one per handle and stream); no per-call
//             scratch, and no widening (cuBLASLt multiplies bf16 natively
//             with fp32 accumulation). The cuda backend must make exactly
//             these allocations.
// Every other op's scratch is device-neutral (backend/*_checks.cc), the
// same for both.
#pragma once

#include <cstdint>
#include <string_view>

namespace headroom {

enum class TargetDevice : uint8_t { kHostCpu, kCuda };

constexpr std::string_view name_of(TargetDevice target) {
  return target == TargetDevice::kCuda ? "cuda" : "host cpu";
}

// cuBLASLt's workspace: 32 MiB, NVIDIA's recommendation for Hopper (cuBLAS
// documentation, cublasSetWorkspace: 32 MiB for sm_90, 4 MiB before), the
// size PyTorch gives Hopper by default (CUBLAS_WORKSPACE_CONFIG ":4096:8")
// and MLX and llm.c use. The users' cards are H100/H200-class; device
// presets will pick 4 MiB for Ampere (A100, A800, RTX 3090).
inline constexpr uint64_t kCublasLtWorkspaceBytes = uint64_t{32} << 20;

}  // namespace headroom
