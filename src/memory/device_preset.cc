#include "memory/device_preset.h"

#include <algorithm>
#include <array>
#include <string>

#include "util/bytes.h"
#include "util/error.h"

namespace headroom {

namespace {

constexpr uint64_t mib(uint64_t n) {
  return n * kMiB;
}

// The lowest byte count that prints as `hundredths`/100 GiB with two
// decimals (PyTorch's "total capacity of 79.10 GiB", vLLM's
// "total_gpu_memory (79.10GiB)"): such a figure only says the value lies in
// [x - 0.005, x + 0.005) GiB, and the planner takes the bottom of it.
constexpr uint64_t printed_gib_floor(uint64_t hundredths) {
  return ((2 * hundredths - 1) * kGiB + 199) / 200;
}

constexpr std::string_view kEstimateNote = "estimate: replace by measurement on a lent GPU";

// --- sources shared by several presets (docs/devices.md cites each) --------------

constexpr std::string_view kContextSource =
    "CUDA context with lazy module loading (default on Linux since CUDA 12.2, CUDA Programming "
    "Guide, Lazy Loading): 'around 400MB if CUDA >= 11.7 is used and lazy module loading "
    "enabled' (ptrblck, pytorch/pytorch#109888); 287,047,680 B measured for torch + one small "
    "tensor with LAZY vs 666,632,192 B eager (pytorch/pytorch#86509). PyTorch's figures, which "
    "load more kernels than headroom; no Hopper-specific figure published";

constexpr std::string_view kCublasHandleSource =
    "no published figure: cublasLtCreate with a caller-owned workspace allocates none of its "
    "own; what remains is the cuBLASLt kernels lazy loading brings into the context on first "
    "use, assumed <= 16 MiB for the few GEMM shapes of a run";

// --- the table --------------------------------------------------------------------------

constexpr std::array<DevicePreset, 9> kPresets = {{
    {.name = "h100-80gb",
     .product = "NVIDIA H100 80GB HBM3 (SXM5, HGX)",
     .arch = GpuArch::kSm90,
     .total = {mib(81559),
               "nvidia-smi 'Total' 81559 MiB (NVIDIA/nccl#1264, wilicc/gpu-burn#114, "
               "modal-labs/modal-client#2797)"},
     .usable = {printed_gib_floor(7910),
                "cudaMemGetInfo total: vLLM 'total_gpu_memory (79.10GiB)' on 8xH100 "
                "(huggingface/trl#2688); PyTorch OOM messages print 'total capacity of 79.11 "
                "GiB' and get_device_properties 81082-81090 MiB on other drivers; lowest taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 32,
              .device_buffers = true,
              .nvls = true,
              .source = "32 channels per GPU pair on 8xH100 (NVIDIA/nccl#1685), rings of >= 23 "
                        "channels on an NVLS H100 board (NVIDIA/nccl#1259); 18 NVLinks per GPU "
                        "(NVIDIA/nccl#1429) at two channels per link, capped at 32"}},
    {.name = "h100-94gb",
     .product = "NVIDIA H100 NVL 94GB (PCIe, NVLink bridge pairs)",
     .arch = GpuArch::kSm90,
     .total = {mib(95830), "nvidia-smi 'Total' 95830 MiB (NVIDIA/gpu-admin-tools#4)"},
     .usable = {99961274368,
                "NVML total 99961274368 B on driver 570.86.15 (fastfetch-cli/fastfetch#1658), "
                "matching PyTorch's 'total capacity of 93.09 GiB' / '93.10 GiB' in public OOM "
                "reports"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 24,
              .device_buffers = true,
              .nvls = false,
              .source = "no published count: the 600 GB/s bridge is 12 NVLink4 links, taken at "
                        "two channels per link as on A100 (12 links, 24 channels); rings that "
                        "cross PCIe between pairs open fewer"}},
    {.name = "h200-141gb",
     .product = "NVIDIA H200 141GB HBM3e (SXM, HGX)",
     .arch = GpuArch::kSm90,
     .total = {mib(143771),
               "nvidia-smi 'Total' 143771 MiB (public nvidia-smi dumps of HGX H200 boards)"},
     .usable = {printed_gib_floor(13972),
                "PyTorch OOM messages print 'total capacity of 139.80 GiB' / '139.81 GiB' and "
                "get_device_properties 143156 MiB; one report 139.72 GiB; lowest taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 32,
              .device_buffers = true,
              .nvls = true,
              .source = "as h100-80gb: HGX H200 has the same 18 NVLink4 links and NVSwitch"}},
    {.name = "a100-40gb",
     .product = "NVIDIA A100-SXM4-40GB (HGX)",
     .arch = GpuArch::kSm80,
     .total = {mib(40960), "nvidia-smi 'Total' 40960 MiB (modal-labs/modal-client#2797)"},
     .usable = {printed_gib_floor(3938),
                "PyTorch OOM messages print 'total capacity of' 39.38-39.59 GiB "
                "(TianheWu/CoSeR#10: 39.50 GiB); get_device_properties 40536 MiB on older "
                "drivers (PaddlePaddle docs); lowest taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 24,
              .device_buffers = true,
              .nvls = false,
              .source = "24 ring channels on HGX A100 (NVIDIA/nccl-tests#100): 12 NVLinks per "
                        "GPU, two channels per link"}},
    {.name = "a100-80gb",
     .product = "NVIDIA A100-SXM4-80GB (HGX)",
     .arch = GpuArch::kSm80,
     .total = {mib(81920),
               "nvidia-smi 'Total' 81920 MiB (modal-labs/modal-client#2797); older "
               "drivers showed 81251 MiB with the reserved part already taken off"},
     .usable = {printed_gib_floor(7915),
                "PyTorch OOM messages print 'total capacity of 79.15 GiB' on current drivers "
                "and 79.32-79.35 GiB on older ones; lowest taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 24,
              .device_buffers = true,
              .nvls = false,
              .source = "24 ring channels on HGX A100 (NVIDIA/nccl-tests#100)"}},
    {.name = "a800-80gb",
     .product = "NVIDIA A800-SXM4-80GB (HGX, NVLink cut to 400 GB/s)",
     .arch = GpuArch::kSm80,
     .total = {mib(81920),
               "nvidia-smi 'Total' 81920 MiB on driver 535.86.10 (dexmal/dexbotic#41; "
               "A800 PCIe the same, vllm-project/vllm#41519)"},
     .usable = {printed_gib_floor(7915),
                "the A100-SXM4-80GB board's 79.15 GiB (same GA100 board and HBM2e); seed 001 "
                "saw '79.3 GiB' on its driver"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 16,
              .device_buffers = true,
              .nvls = false,
              .source = "no published A800 count: 8 NVLinks at two channels per link, as H800 "
                        "(8 links) opens 16 coll channels (NVIDIA/nccl#892)"}},
    {.name = "rtx3090-24gb",
     .product = "NVIDIA GeForce RTX 3090 24GB (PCIe, no NVLink bridge)",
     .arch = GpuArch::kSm86,
     .total = {mib(24576), "nvidia-smi 'Total' 24576 MiB (noonghunna/club-3090#1106)"},
     .usable = {mib(24259),
                "get_device_properties 24259 MiB in a public dump, 24268 MiB in the Hugging Face "
                "docs' example; PyTorch OOM 'total capacity 23.70 GiB' (GaoLii/DSP#10); lowest "
                "taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 2,
              .device_buffers = false,
              .nvls = false,
              .source = "PCIe: one search channel, two execution channels (sjeaugey, "
                        "NVIDIA/nccl#1041); GeForce drivers offer no PCIe peer access, so NCCL "
                        "uses SHM through host memory (NVIDIA/nccl-tests#228 shows SHM rings)"}},
    {.name = "rtx4090-24gb",
     .product = "NVIDIA GeForce RTX 4090 24GB (PCIe)",
     .arch = GpuArch::kSm89,
     .total = {mib(24564),
               "nvidia-smi 'Total' 24564 MiB (RLinf/RLinf#255, vllm-project/vllm#7768)"},
     .usable = {printed_gib_floor(2352),
                "PyTorch OOM messages print 'total capacity of' 23.52 GiB "
                "(Soul-AILab/SoulX-FlashTalk#5) to 23.68 GiB (zai-org/CogVideo#36; 23.64 in "
                "ali-vilab/VGen#104); lowest taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 2,
              .device_buffers = false,
              .nvls = false,
              .source = "as rtx3090-24gb: PCIe, two channels, SHM transport (no peer access on "
                        "GeForce)"}},
    {.name = "l40s-48gb",
     .product = "NVIDIA L40S 48GB GDDR6 (PCIe, ECC on)",
     .arch = GpuArch::kSm89,
     .total = {mib(46068),
               "nvidia-smi 'Total' 46068 MiB with ECC on "
               "(akash-network/provider-configs#99, modal-labs/modal-client#2797)"},
     .usable = {printed_gib_floor(4439),
                "vLLM and PyTorch reports print 44.39-44.47 GiB (44.40 GiB on an L40, "
                "QwenLM/Qwen3-VL#2097); lowest taken"},
     .cuda_context = {mib(400), kContextSource},
     .cublaslt_handle = {mib(16), kCublasHandleSource},
     .nccl = {.channels = 2,
              .device_buffers = true,
              .nvls = false,
              .source = "PCIe: two execution channels (NVIDIA/nccl#1041); datacenter boards "
                        "allow PCIe peer access, so P2P buffers in device memory"}},
}};

// --- NCCL's buffers (docs/devices.md, "NCCL") ---------------------------------------------
//
// From NCCL 2.30.7's source (src/init.cc computeBuffSizes, src/include/device.h,
// src/include/comm.h, src/transport/p2p.cc) at the documented defaults
// (NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE unset):
//   LL     8 lines/thread x 512 threads x 8 steps x 16 B       =   524,288 B
//   LL128  120 elems/thread x 640 threads x 8 steps x 8 B      = 4,915,200 B
//   SIMPLE NCCL_BUFFSIZE                                        = 4,194,304 B
// A P2P connection puts LL + LL128 (+ SIMPLE in write mode) on the receiver
// and SIMPLE (read mode) on the sender, each behind a 4 KiB ncclRecvMem /
// ncclSendMem header and rounded up to CUDA_IPC_MIN = 2 MiB: 6 + 6 MiB, or
// 10 + 2 MiB. A ring channel gives every GPU one inbound and one outbound
// connection, so 12 MiB per channel on each GPU whichever the mode.
constexpr uint64_t kLlBuffBytes = 8 * 512 * 8 * 16;
constexpr uint64_t kLl128BuffBytes = 120 * 640 * 8 * 8;
constexpr uint64_t kSimpleBuffBytes = uint64_t{4} << 20;
constexpr uint64_t kConnHeaderBytes = 4096;        // MEM_ALIGN
constexpr uint64_t kIpcAlign = uint64_t{2} << 20;  // CUDA_IPC_MIN

constexpr uint64_t round_up(uint64_t bytes, uint64_t to) {
  return (bytes + to - 1) / to * to;
}

constexpr uint64_t kRingChannelBytes =
    round_up(kConnHeaderBytes + kLlBuffBytes + kLl128BuffBytes, kIpcAlign) +
    round_up(kConnHeaderBytes + kSimpleBuffBytes, kIpcAlign);
static_assert(kRingChannelBytes == 12 * kMiB);

// NVLS (src/transport/nvls.cc): 16 channels on sm_90 x 2 (reduce, broadcast)
// x NCCL_NVLS_CHUNKSIZE 128 KiB x 8 steps per head, one head per GPU of the
// NVLink domain.
constexpr uint64_t kNvlsBytesPerHead = 16 * 2 * (uint64_t{128} << 10) * 8;
static_assert(kNvlsBytesPerHead == 32 * kMiB);

// What NVIDIA/nccl#964 measured per communicator beyond the buffers above: 544 MiB
// for a 2-rank group and 688 MiB for 3 and 4 ranks on 4xA100 with NVLink. The
// model's buffer terms give 144 and 288 MiB there if that board opened 12
// channels, leaving the same 400 MiB in both: carried as one line until it
// is measured.
constexpr uint64_t kCommOtherBytes = 400 * kMiB;

// The GPUs of one NVLink domain when the caller does not say (HGX boards).
constexpr int kDefaultRanksPerNode = 8;

std::string mib_text(uint64_t bytes) {
  return std::to_string(bytes / kMiB) + " MiB";
}

std::string preset_choices() {
  std::string text;
  const std::vector<std::string_view> names = device_preset_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += "\"" + std::string(names[i]) + "\"";
  }
  return text;
}

}  // namespace

std::string_view name_of(GpuArch arch) {
  switch (arch) {
    case GpuArch::kSm80:
      return "sm_80";
    case GpuArch::kSm86:
      return "sm_86";
    case GpuArch::kSm89:
      return "sm_89";
    case GpuArch::kSm90:
      return "sm_90";
  }
  return "sm_?";
}

uint64_t cublaslt_workspace_bytes(GpuArch arch) {
  // cuBLAS documentation, cublasSetWorkspace: "32 MiB for Hopper, 4 MiB for
  // other architectures"; PyTorch follows it for sm_90 and for Ampere boards
  // of >= 24 GiB (pytorch/pytorch#120925), and the Ada boards here are
  // compute capability 8.x too.
  return arch == GpuArch::kSm90 ? 32 * kMiB : 4 * kMiB;
}

std::span<const DevicePreset> device_presets() {
  return kPresets;
}

const DevicePreset* find_device_preset(std::string_view name) {
  for (const DevicePreset& preset : kPresets)
    if (preset.name == name) return &preset;
  return nullptr;
}

std::vector<std::string_view> device_preset_names() {
  std::vector<std::string_view> names;
  for (const DevicePreset& preset : kPresets)
    names.push_back(preset.name);
  return names;
}

DeviceBudget budget_for(const DevicePreset& preset, const BudgetOptions& options) {
  const std::string where = "memory.device = \"" + std::string(preset.name) + "\"";
  if (options.world_size < 1)
    throw UsageError(where + ": world size must be >= 1, got " +
                     std::to_string(options.world_size));
  if (options.nccl_communicators < -1)
    throw UsageError(where +
                     ": NCCL communicators must be >= 0 (or -1 for one per multi-rank "
                     "run), got " +
                     std::to_string(options.nccl_communicators));
  if (options.ranks_per_node < 0)
    throw UsageError(where + ": ranks per node must be >= 0, got " +
                     std::to_string(options.ranks_per_node));

  DeviceBudget budget;
  budget.preset = &preset;
  budget.usable_bytes = preset.usable.bytes;
  budget.cublaslt_workspace_bytes = cublaslt_workspace_bytes(preset.arch);
  const std::string estimate(kEstimateNote);
  budget.lines.push_back({"cuda.context", preset.cuda_context.bytes,
                          std::string(preset.cuda_context.source) + "; " + estimate, true});
  budget.lines.push_back({"cublaslt.handle", preset.cublaslt_handle.bytes,
                          std::string(preset.cublaslt_handle.source) + "; " + estimate, true});

  const int world = options.world_size;
  const int comms =
      options.nccl_communicators >= 0 ? options.nccl_communicators : (world > 1 ? 1 : 0);
  // A one-rank job has no peers: NCCL is neither initialized nor needed.
  if (world > 1 && comms > 0) {
    const NcclTopology& nccl = preset.nccl;
    const uint64_t n = static_cast<uint64_t>(comms);
    const std::string per_comm =
        comms == 1 ? "" : " per communicator, x " + std::to_string(comms) + " communicators";
    const std::string channels =
        std::to_string(nccl.channels) + " channels (" + std::string(nccl.source) + ")";
    const uint64_t ring = nccl.device_buffers ? nccl.channels * kRingChannelBytes : 0;
    const std::string transport =
        nccl.device_buffers
            ? "12 MiB per channel: LL 512 KiB + LL128 4.6875 MiB + SIMPLE 4 MiB (NCCL_BUFFSIZE "
              "default) with 4 KiB headers, each side rounded to 2 MiB (NCCL 2.30.7 "
              "src/transport/p2p.cc)"
            : "SHM transport: the buffers are in pinned host memory, none on the device";
    budget.lines.push_back({"nccl.ring_buffers", ring * n,
                            channels + " x " + transport + per_comm + "; " + estimate, true});
    // Trees (all_reduce) run on the same channels: a chain's reduce
    // direction adds the reverse pair of connections once there are two
    // distinct neighbours; with two ranks they are the ring's own.
    if (world >= 3) {
      budget.lines.push_back(
          {"nccl.tree_buffers", ring * n,
           channels +
               " x 12 MiB: the tree's reverse-direction connections, present from 3 "
               "ranks (NCCL connects per channel and peer, and reuses the ring's)" +
               per_comm + "; " + estimate,
           true});
    }
    if (nccl.nvls) {
      const int per_node = options.ranks_per_node > 0 ? options.ranks_per_node
                                                      : std::min(world, kDefaultRanksPerNode);
      const int heads = std::min(world, per_node);
      budget.lines.push_back(
          {"nccl.nvls_buffers", kNvlsBytesPerHead * static_cast<uint64_t>(heads) * n,
           std::to_string(heads) +
               " NVLS heads x 32 MiB: 16 channels (sm_90) x 2 x 128 KiB chunk x 8 steps "
               "(NCCL 2.30.7 src/transport/nvls.cc), before rounding to the multicast "
               "granularity, which is not published; 0 with NCCL_NVLS_ENABLE=0" +
               per_comm + "; " + estimate,
           true});
    }
    budget.lines.push_back(
        {"nccl.comm_other", kCommOtherBytes * n,
         "the 400 MiB per communicator that NVIDIA/nccl#964's measurement (544 MiB at 2 ranks, "
         "688 MiB at 3-4 ranks, 4xA100) leaves after the buffer terms at 12 channels; origin "
         "not known" +
             per_comm + "; " + estimate,
         true});
  }

  for (const BudgetLine& line : budget.lines)
    budget.outside_bytes += line.bytes;
  if (budget.outside_bytes > budget.usable_bytes) {
    std::string lines;
    for (const BudgetLine& line : budget.lines)
      lines += (lines.empty() ? "" : ", ") + line.name + " " + mib_text(line.bytes);
    throw UsageError(where + ": at world size " + std::to_string(world) +
                     " the memory outside the allocator (" + mib_text(budget.outside_bytes) + ": " +
                     lines + ") exceeds the " + format_bytes_exact(budget.usable_bytes) +
                     " a process can use; nothing is left for the allocator");
  }
  const uint64_t left = budget.usable_bytes - budget.outside_bytes;
  if (options.capacity_cap > left) {
    throw UsageError("memory.device_capacity: " + format_bytes_exact(options.capacity_cap) +
                     " exceeds the " + format_bytes_exact(left) + " that " + where +
                     " leaves for the allocator at world size " + std::to_string(world) +
                     "; set memory.device_capacity = 0 to use all of it");
  }
  budget.allocator_capacity = options.capacity_cap > 0 ? options.capacity_cap : left;
  return budget;
}

std::optional<DeviceBudget> device_budget(std::string_view device, const BudgetOptions& options) {
  if (device.empty()) return std::nullopt;
  const DevicePreset* preset = find_device_preset(device);
  if (!preset)
    throw UsageError("memory.device: unknown device \"" + std::string(device) + "\"; expected " +
                     preset_choices());
  return budget_for(*preset, options);
}

}  // namespace headroom
