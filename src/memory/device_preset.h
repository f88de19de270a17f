// Device presets: the GPUs headroom plans for, and the memory a real run on
// them holds outside headroom's allocator.
//
// A GPU's "80 GB" is not what the allocator gets. The driver keeps part of
// the board (nvidia-smi "Total" vs cudaMemGetInfo's total), the CUDA context
// takes its share at the first CUDA call, libraries load kernels into it and
// NCCL allocates its buffers with cudaMalloc/cuMem behind the allocator's
// back. Seed 001 is that trap: "77.3 / 79.3 GiB in use, 207 MiB free" on an
// 80 GB A800. A preset names each of those figures with its source, and
// budget_for() turns them into named lines and the capacity left for the
// allocator, so `plan` can count them as a real run does.
//
// Every figure is a published one or an estimate derived from published
// ones (docs/devices.md lists each with its source); none is yet measured
// by headroom on the GPU itself. Each line says so (`estimate`), and the
// figures are to be replaced by measurement where a GPU is lent.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// The compute capability a preset's kernels are built for.
enum class GpuArch : uint8_t { kSm80, kSm86, kSm89, kSm90 };

// "sm_80", "sm_86", "sm_89", "sm_90".
std::string_view name_of(GpuArch arch);

// cuBLASLt's workspace for `arch`: 32 MiB on Hopper (sm_90), 4 MiB before,
// as the cuBLAS documentation recommends (cublasSetWorkspace). It is
// allocated through headroom's allocator (category workspace), so it is not
// a line of the budget below; the planner's gemm workspace must follow the
// target's arch, hence this function.
uint64_t cublaslt_workspace_bytes(GpuArch arch);

// How NCCL connects ranks on one node of this product, as far as it moves
// device memory (docs/devices.md, "NCCL").
struct NcclTopology {
  // Collective channels NCCL opens within a node; each ring channel holds
  // one inbound and one outbound connection's buffers on every GPU.
  int channels = 0;
  // true: P2P transport (NVLink, or PCIe peer access), buffers in device
  // memory. false: SHM transport through host memory (GeForce boards, whose
  // driver offers no PCIe peer access), buffers in pinned host memory.
  bool device_buffers = true;
  // NVLink SHARP through an NVSwitch (HGX Hopper): NCCL also allocates
  // multicast buffers per NVLS head.
  bool nvls = false;
  std::string_view source;  // where the channel count comes from
};

// One figure of a preset: bytes, and where they come from.
struct PresetFigure {
  uint64_t bytes = 0;
  std::string_view source;
};

struct DevicePreset {
  std::string_view name;     // "h100-80gb": the memory.device spelling
  std::string_view product;  // "NVIDIA H100 80GB HBM3 (SXM5)"
  GpuArch arch = GpuArch::kSm80;
  // The board's memory as nvidia-smi's "Total" shows it on current drivers.
  PresetFigure total;
  // What one process can be given at most: cudaMemGetInfo's total (what
  // PyTorch prints as "total capacity"), i.e. total less what the driver
  // and firmware keep. The lowest published figure for the product.
  PresetFigure usable;
  // The CUDA context with lazy module loading (CUDA_MODULE_LOADING=LAZY,
  // the default on Linux since CUDA 12.2).
  PresetFigure cuda_context;
  // The cuBLASLt handle and the kernels it loads into the context; its
  // workspace is headroom's (cublaslt_workspace_bytes).
  PresetFigure cublaslt_handle;
  NcclTopology nccl;
};

// Every preset, in the order of docs/devices.md: h100-80gb, h100-94gb,
// h200-141gb, a100-40gb, a100-80gb, a800-80gb, rtx3090-24gb, rtx4090-24gb,
// l40s-48gb.
std::span<const DevicePreset> device_presets();

// The preset called `name`, or nullptr when there is none.
const DevicePreset* find_device_preset(std::string_view name);

// The preset names, in device_presets() order.
std::vector<std::string_view> device_preset_names();

// One named amount of device memory held outside the allocator.
struct BudgetLine {
  std::string name;      // "cuda.context", "nccl.ring_buffers", ...
  uint64_t bytes = 0;    // for this rank
  std::string source;    // where the figure comes from, and how it was derived
  bool estimate = true;  // not yet measured on the device by headroom
};

struct BudgetOptions {
  int world_size = 1;  // ranks in the job, >= 1
  // NCCL communicators each rank holds, each assumed to span all ranks;
  // -1 = one when world_size > 1, none otherwise. 0 = no NCCL.
  int nccl_communicators = -1;
  // Ranks on one node (bounds NVLS heads); 0 = min(world_size, 8), the
  // GPUs of one HGX board.
  int ranks_per_node = 0;
  // memory.device_capacity: when > 0, the allocator's capacity instead of
  // what the preset leaves, and it must not exceed that.
  uint64_t capacity_cap = 0;
};

struct DeviceBudget {
  const DevicePreset* preset = nullptr;
  uint64_t usable_bytes = 0;              // preset->usable.bytes
  std::vector<BudgetLine> lines;          // memory outside the allocator, in order
  uint64_t outside_bytes = 0;             // sum of lines
  uint64_t allocator_capacity = 0;        // what memory.device_capacity would be
  uint64_t cublaslt_workspace_bytes = 0;  // for the planner's gemm workspace
};

// The lines a rank of a run on `preset` holds outside the allocator, and
// the capacity left for it: allocator_capacity = usable - sum(lines), or
// options.capacity_cap when that is set. Lines, in order: cuda.context,
// cublaslt.handle and, when NCCL is used, nccl.ring_buffers,
// nccl.tree_buffers (world_size >= 3), nccl.nvls_buffers (NVSwitch boards)
// and nccl.comm_other. A pure function of its arguments.
//
// Throws UsageError when world_size < 1, nccl_communicators < -1 or
// ranks_per_node < 0; when the lines exceed the usable memory (the message
// names the preset, the world size and each line); and when capacity_cap
// exceeds what the lines leave (naming memory.device_capacity and
// memory.device).
DeviceBudget budget_for(const DevicePreset& preset, const BudgetOptions& options);

// The one call for a resolved config: `device` is memory.device ("" = no
// preset: returns nullopt, and memory.device_capacity alone bounds the
// allocator), options.capacity_cap is memory.device_capacity. Throws
// UsageError for a name that is not a preset (listing the presets), and
// whatever budget_for() throws.
std::optional<DeviceBudget> device_budget(std::string_view device, const BudgetOptions& options);

}  // namespace headroom
