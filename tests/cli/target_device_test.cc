// A plan of a cuda run follows the GPU's rules, never the planning host's:
// every postmortem experiment planned for run.backend = "cuda" makes the
// same events, event for event, whether oneDNN may use the host's AVX-512
// and AMX or only AVX2 (DNNL_MAX_CPU_ISA) — while the cpu-target plan of
// the same experiment may differ, since a cpu run does run on its host.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "memory/allocator.h"
#include "memory/device_preset.h"
#include "test_util/source_tree.h"
#include "trace/reader.h"

namespace fs = std::filesystem;

namespace headroom {
namespace {

using testing::Result;

// What a plan is, event for event: the times and the virtual addresses
// aside (neither is part of the plan's promise).
struct PlannedEvent {
  uint64_t seq;
  int64_t step;
  MemoryAction action;
  uint64_t bytes;
  Category category;
  std::string tag;
  Phase phase;
  int32_t layer;
  bool operator==(const PlannedEvent&) const = default;
};

std::vector<PlannedEvent> planned_events(const fs::path& trace_path) {
  const TraceReader trace = TraceReader::open(trace_path.string());
  const std::vector<std::string> tags = trace.tags();
  std::vector<PlannedEvent> events;
  for (const MemoryEvent& e : trace.events())
    events.push_back({e.seq, e.step, e.action, e.bytes, e.category,
                      e.tag_id < tags.size() ? tags[e.tag_id] : "?", e.phase, e.layer});
  return events;
}

class TargetDevicePlans : public testing::ScratchFolder {
 protected:
  // Plans `experiment` for `backend` with oneDNN limited to `isa` ("" = the
  // host's best), with no capacity (some experiments plan their OOM),
  // returning the events of plan.rank0.h5.
  std::vector<PlannedEvent> plan(const std::string& experiment, const std::string& backend,
                                 const std::string& isa) {
    const std::string name = fs::path(experiment).stem().string() + "-" + backend +
                             (isa.empty() ? "-native" : "-" + isa);
    const Result r =
        run_headroom("plan '" + testing::source_dir() + "/experiments/postmortems/" + experiment +
                         "' --set run.backend=\\\"" + backend + "\\\" --set run.name=\\\"" + name +
                         "\\\" --set run.steps=1 --set memory.device_capacity=0 --set "
                         "memory.device=\\\"\\\"",
                     isa.empty() ? "" : "DNNL_MAX_CPU_ISA=" + isa + " ");
    EXPECT_EQ(r.code, 0) << experiment << " " << backend << " " << isa << "\n" << r.err;
    return planned_events(dir_ / "results" / name / "plan.rank0.h5");
  }
};

TEST_F(TargetDevicePlans, ACudaPlanIsTheSameOnEveryHost) {
  for (const char* experiment :
       {"seed000_zero3_lora.toml", "seed000_dense_mask.toml", "seed001_chunked_loss.toml",
        "seed003_offload_7b.toml", "seed003_master_dtype_7b.toml", "seed003_qlora_7b.toml",
        "seed004_lora_24gb.toml"}) {
    SCOPED_TRACE(experiment);
    const std::vector<PlannedEvent> native = plan(experiment, "cuda", "");
    const std::vector<PlannedEvent> avx2 = plan(experiment, "cuda", "AVX2");
    ASSERT_FALSE(native.empty());
    EXPECT_TRUE(native == avx2) << native.size() << " vs " << avx2.size() << " events";
    // cuBLASLt's workspace once; none of oneDNN's per-call scratch.
    int workspaces = 0;
    for (const PlannedEvent& e : native) {
      EXPECT_EQ(e.tag.rfind("gemm.", 0), std::string::npos) << e.tag;
      workspaces += e.tag == "cublaslt.workspace" && e.action == MemoryAction::kAlloc;
    }
    EXPECT_EQ(workspaces, 1);
  }
}

TEST_F(TargetDevicePlans, ACpuPlanFollowsItsHost) {
  // The same experiment for the cpu asks the host's oneDNN: the gemm
  // scratch (and, without native bf16, the widened copies) are the host's.
  const std::vector<PlannedEvent> cpu = plan("seed004_lora_24gb.toml", "cpu", "");
  int gemm_scratch = 0;
  for (const PlannedEvent& e : cpu) {
    EXPECT_NE(e.tag, "cublaslt.workspace");
    gemm_scratch += e.tag.rfind("gemm.", 0) == 0;
  }
  EXPECT_GT(gemm_scratch, 0);
}

// `train` on run.backend = "cuda" that cannot run here (no toolkit in the
// build, no device, or an op without a cuda kernel yet) says which, with
// exit 2, before it locks or writes its run folder.
TEST_F(TargetDevicePlans, ACudaTrainingThatCannotRunHereSaysWhyAndWritesNothing) {
  const Result r = run_headroom(
      "train --set run.backend=\"cuda\" --set attention.backend=\"dense_additive\" "
      "--set run.steps=1 --set schedule.warmup_steps=1 --set run.name=\"on-gpu\"");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("run.backend = \"cuda\""), std::string::npos) << r.err;
  // Which of the three it is depends on the build and the machine; each
  // names its cause.
  EXPECT_TRUE(r.err.find("cudaGetDeviceCount") != std::string::npos ||
              r.err.find("without the CUDA toolkit") != std::string::npos ||
              r.err.find("has no kernel yet for") != std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "results" / "on-gpu")) << "a refused run wrote its folder";
}

// memory.device sets what the allocator gets (usable minus the named lines
// outside it, recorded in the trace) and the cuBLASLt workspace of the
// preset's architecture: 4 MiB on Ampere, 32 MiB on Hopper.
TEST_F(TargetDevicePlans, ADevicePresetSetsTheCapacityAndTheWorkspace) {
  for (const auto& [device, workspace] :
       {std::pair<std::string, uint64_t>{"a100-40gb", uint64_t{4} << 20},
        std::pair<std::string, uint64_t>{"h100-80gb", uint64_t{32} << 20}}) {
    SCOPED_TRACE(device);
    const Result r = run_headroom(
        "plan '" + testing::source_dir() +
        "/experiments/postmortems/seed004_lora_24gb.toml' --set run.backend=\\\"cuda\\\" "
        "--set run.steps=1 --set memory.device_capacity=0 --set memory.device=\\\"" +
        device + "\\\" --set run.name=\\\"" + device + "\\\"");
    EXPECT_NE(r.out.find("memory.device " + device), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("cuda.context"), std::string::npos) << r.out;
    const TraceReader trace =
        TraceReader::open((dir_ / "results" / device / "plan.rank0.h5").string());
    const std::optional<DeviceBudget> budget = device_budget(device, BudgetOptions{});
    ASSERT_TRUE(budget.has_value());
    EXPECT_EQ(trace.header().capacity_bytes, budget->allocator_capacity);
    EXPECT_NE(trace.header().outside_allocator.find("cuda.context 419430400"), std::string::npos)
        << trace.header().outside_allocator;
    int workspaces = 0;
    for (const PlannedEvent& e : planned_events(dir_ / "results" / device / "plan.rank0.h5"))
      if (e.tag == "cublaslt.workspace" && e.action == MemoryAction::kAlloc) {
        ++workspaces;
        EXPECT_EQ(e.bytes, Allocator::round_size(workspace));
      }
    EXPECT_EQ(workspaces, 1);
  }
}

// The two targets' plans differ by the documented gemm rules and nothing
// else: with the gemm's own blocks set aside (oneDNN's per-call copies and
// scratchpad on the host, cuBLASLt's one workspace on cuda), every block the
// model, optimizer and loss allocate is the same, in the same order. Segments
// are set aside too: the caching allocator's segment layout follows from
// every block, gemm scratch included. So, within a block, does its size: a
// large block keeps a tail of up to kSmallSize that is not worth splitting
// off (PyTorch's should_split), so the same request is handed a block up to
// that much larger depending on what the cache holds. On a host without a
// native bf16 matmul the widened copies fill the cache differently from
// cuBLASLt's workspace, and sizes differ there by such tails.
TEST_F(TargetDevicePlans, TheTargetsDifferOnlyByTheirGemmWorkspaceRules) {
  auto model_blocks = [](const std::vector<PlannedEvent>& events) {
    std::vector<PlannedEvent> kept;
    for (PlannedEvent e : events) {
      if (e.action != MemoryAction::kAlloc && e.action != MemoryAction::kFree) continue;
      if (e.tag.rfind("gemm.", 0) == 0 || e.tag == "cublaslt.workspace") continue;
      e.seq = 0;
      kept.push_back(e);
    }
    return kept;
  };
  for (const char* experiment : {"seed001_chunked_loss.toml", "seed004_lora_24gb.toml"}) {
    SCOPED_TRACE(experiment);
    const std::vector<PlannedEvent> cpu = model_blocks(plan(experiment, "cpu", ""));
    const std::vector<PlannedEvent> cuda = model_blocks(plan(experiment, "cuda", ""));
    ASSERT_FALSE(cpu.empty());
    ASSERT_EQ(cpu.size(), cuda.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      PlannedEvent cuda_sized = cuda[i];
      cuda_sized.bytes = cpu[i].bytes;
      ASSERT_TRUE(cpu[i] == cuda_sized)
          << "block event " << i << ": " << cpu[i].tag << " vs " << cuda[i].tag;
      const uint64_t larger = std::max(cpu[i].bytes, cuda[i].bytes);
      ASSERT_LE(larger - std::min(cpu[i].bytes, cuda[i].bytes), kSmallSize)
          << "block event " << i << ": " << cpu[i].tag << " " << cpu[i].bytes << " vs "
          << cuda[i].bytes << " bytes";
    }
  }
}

}  // namespace
}  // namespace headroom
