// Device presets and the budget of memory outside the allocator: the table's
// figures, the lines budget_for() derives from them, NCCL's growth with the
// world size, and the budgets it must refuse.
#include "memory/device_preset.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "util/bytes.h"
#include "util/error.h"

namespace headroom {
namespace {

const DevicePreset& preset(std::string_view name) {
  const DevicePreset* found = find_device_preset(name);
  EXPECT_NE(found, nullptr) << name;
  if (!found) throw std::runtime_error("no preset " + std::string(name));
  return *found;
}

const BudgetLine* line(const DeviceBudget& budget, std::string_view name) {
  for (const BudgetLine& l : budget.lines)
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<std::string> line_names(const DeviceBudget& budget) {
  std::vector<std::string> names;
  for (const BudgetLine& l : budget.lines)
    names.push_back(l.name);
  return names;
}

// The message of the UsageError `fn` throws, or "" when it throws none.
template <class Fn>
std::string usage_error(Fn fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// --- the table ------------------------------------------------------------------------

TEST(DevicePresets, AreTheNineOfTheIssueInOrder) {
  EXPECT_EQ(device_preset_names(),
            (std::vector<std::string_view>{"h100-80gb", "h100-94gb", "h200-141gb", "a100-40gb",
                                           "a100-80gb", "a800-80gb", "rtx3090-24gb", "rtx4090-24gb",
                                           "l40s-48gb"}));
  EXPECT_EQ(device_presets().size(), 9u);
  EXPECT_EQ(find_device_preset("h100"), nullptr);
  EXPECT_EQ(find_device_preset(""), nullptr);
  EXPECT_EQ(find_device_preset("H100-80GB"), nullptr);  // names are exact, as in the config
}

TEST(DevicePresets, EveryFigureIsPlausibleAndSourced) {
  std::set<std::string_view> names;
  for (const DevicePreset& p : device_presets()) {
    SCOPED_TRACE(std::string(p.name));
    EXPECT_TRUE(names.insert(p.name).second);
    EXPECT_FALSE(p.product.empty());
    // The driver keeps something of every board, but never a tenth of it.
    EXPECT_LT(p.usable.bytes, p.total.bytes);
    EXPECT_GT(p.usable.bytes, p.total.bytes / 10 * 9);
    EXPECT_GT(p.cuda_context.bytes, 0u);
    EXPECT_GT(p.cublaslt_handle.bytes, 0u);
    EXPECT_GT(p.nccl.channels, 0);
    for (std::string_view source : {p.total.source, p.usable.source, p.cuda_context.source,
                                    p.cublaslt_handle.source, p.nccl.source})
      EXPECT_GT(source.size(), 20u) << source;
    EXPECT_EQ(find_device_preset(p.name), &p);
  }
}

TEST(DevicePresets, FiguresAreTheCitedOnes) {
  // Restated from docs/devices.md, so an edit of the table shows up here and
  // must be made in the docs too.
  struct Expected {
    std::string_view name;
    GpuArch arch;
    uint64_t total_mib;
    uint64_t usable_bytes;
    int channels;
    bool device_buffers;
    bool nvls;
  };
  const Expected expected[] = {
      {"h100-80gb", GpuArch::kSm90, 81559, 84927609570, 32, true, true},
      {"h100-94gb", GpuArch::kSm90, 95830, 99961274368, 24, true, false},
      {"h200-141gb", GpuArch::kSm90, 143771, 150017838941, 32, true, true},
      {"a100-40gb", GpuArch::kSm80, 40960, 42278584320, 24, true, false},
      {"a100-80gb", GpuArch::kSm80, 81920, 84981296661, 24, true, false},
      {"a800-80gb", GpuArch::kSm80, 81920, 84981296661, 16, true, false},
      {"rtx3090-24gb", GpuArch::kSm86, 24576, 24259 * kMiB, 2, false, false},
      {"rtx4090-24gb", GpuArch::kSm89, 24564, 25249038992, 2, false, false},
      {"l40s-48gb", GpuArch::kSm89, 46068, 47658030859, 2, true, false},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(std::string(e.name));
    const DevicePreset& p = preset(e.name);
    EXPECT_EQ(p.arch, e.arch);
    EXPECT_EQ(p.total.bytes, e.total_mib * kMiB);
    EXPECT_EQ(p.usable.bytes, e.usable_bytes);
    EXPECT_EQ(p.cuda_context.bytes, 400 * kMiB);
    EXPECT_EQ(p.cublaslt_handle.bytes, 16 * kMiB);
    EXPECT_EQ(p.nccl.channels, e.channels);
    EXPECT_EQ(p.nccl.device_buffers, e.device_buffers);
    EXPECT_EQ(p.nccl.nvls, e.nvls);
  }
}

TEST(DevicePresets, PrintedGibFiguresAreTakenAtTheBottomOfTheirRounding) {
  // "79.10 GiB" covers [79.095, 79.105) GiB; the preset holds the first byte of it.
  const uint64_t usable = preset("h100-80gb").usable.bytes;
  EXPECT_GE(static_cast<double>(usable), 79.095 * static_cast<double>(kGiB));
  EXPECT_LT(static_cast<double>(usable - 1), 79.095 * static_cast<double>(kGiB));
}

TEST(DevicePresets, SeedOnesA800IsNotPromisedMoreThanItShowed) {
  // Seed 001: "77.3 / 79.3 GiB in use" on an 80 GB A800.
  EXPECT_LE(preset("a800-80gb").usable.bytes, static_cast<uint64_t>(79.3 * kGiB));
}

TEST(CublasLtWorkspace, FollowsTheArchitecture) {
  EXPECT_EQ(cublaslt_workspace_bytes(GpuArch::kSm90), 32 * kMiB);
  EXPECT_EQ(cublaslt_workspace_bytes(GpuArch::kSm89), 4 * kMiB);
  EXPECT_EQ(cublaslt_workspace_bytes(GpuArch::kSm86), 4 * kMiB);
  EXPECT_EQ(cublaslt_workspace_bytes(GpuArch::kSm80), 4 * kMiB);
  EXPECT_EQ(budget_for(preset("h200-141gb"), {}).cublaslt_workspace_bytes, 32 * kMiB);
  EXPECT_EQ(budget_for(preset("a800-80gb"), {}).cublaslt_workspace_bytes, 4 * kMiB);
  EXPECT_EQ(name_of(GpuArch::kSm89), "sm_89");
}

// --- the budget -----------------------------------------------------------------------

TEST(DeviceBudget, EveryPresetsLinesSumAndLeaveTheRestToTheAllocator) {
  for (const DevicePreset& p : device_presets()) {
    for (int world : {1, 2, 3, 8, 64}) {
      SCOPED_TRACE(std::string(p.name) + " world " + std::to_string(world));
      const DeviceBudget b = budget_for(p, {.world_size = world});
      EXPECT_EQ(b.preset, &p);
      EXPECT_EQ(b.usable_bytes, p.usable.bytes);
      uint64_t sum = 0;
      for (const BudgetLine& l : b.lines) {
        sum += l.bytes;
        EXPECT_TRUE(l.estimate) << l.name;  // nothing is measured yet
        EXPECT_NE(l.source.find("estimate: replace by measurement on a lent GPU"),
                  std::string::npos)
            << l.name;
      }
      EXPECT_EQ(b.outside_bytes, sum);
      EXPECT_EQ(b.allocator_capacity, b.usable_bytes - b.outside_bytes);
    }
  }
}

TEST(DeviceBudget, OneRankHoldsTheContextAndTheHandleOnly) {
  const DevicePreset& h100 = preset("h100-80gb");
  const DeviceBudget b = budget_for(h100, {});
  EXPECT_EQ(line_names(b), (std::vector<std::string>{"cuda.context", "cublaslt.handle"}));
  EXPECT_EQ(b.outside_bytes, 416 * kMiB);
  EXPECT_EQ(b.allocator_capacity, 84927609570 - 416 * kMiB);
  // Asking for communicators on one rank changes nothing: there are no peers.
  EXPECT_EQ(budget_for(h100, {.world_size = 1, .nccl_communicators = 4}).outside_bytes, 416 * kMiB);
}

TEST(DeviceBudget, NcclLinesGrowWithTheWorldUpToOneNode) {
  const DevicePreset& h100 = preset("h100-80gb");
  const DeviceBudget two = budget_for(h100, {.world_size = 2});
  EXPECT_EQ(line_names(two),
            (std::vector<std::string>{"cuda.context", "cublaslt.handle", "nccl.ring_buffers",
                                      "nccl.nvls_buffers", "nccl.comm_other"}));
  EXPECT_EQ(line(two, "nccl.ring_buffers")->bytes, 32 * 12 * kMiB);  // 384 MiB
  EXPECT_EQ(line(two, "nccl.nvls_buffers")->bytes, 2 * 32 * kMiB);
  EXPECT_EQ(line(two, "nccl.comm_other")->bytes, 400 * kMiB);

  // From three ranks the tree's reverse connections are distinct from the ring's.
  const DeviceBudget four = budget_for(h100, {.world_size = 4});
  EXPECT_EQ(line(four, "nccl.tree_buffers")->bytes, 32 * 12 * kMiB);
  EXPECT_EQ(line(four, "nccl.nvls_buffers")->bytes, 4 * 32 * kMiB);

  // One NVLS head per GPU of the node, so growth stops at the 8 GPUs of a board ...
  const DeviceBudget eight = budget_for(h100, {.world_size = 8});
  const DeviceBudget sixty_four = budget_for(h100, {.world_size = 64});
  EXPECT_EQ(line(eight, "nccl.nvls_buffers")->bytes, 8 * 32 * kMiB);
  EXPECT_EQ(sixty_four.outside_bytes, eight.outside_bytes);
  EXPECT_EQ(eight.outside_bytes, (416 + 384 + 384 + 256 + 400) * kMiB);  // 1840 MiB
  // ... or of a smaller node, when the caller says so.
  EXPECT_EQ(
      line(budget_for(h100, {.world_size = 64, .ranks_per_node = 4}), "nccl.nvls_buffers")->bytes,
      4 * 32 * kMiB);

  // Monotone in the world size.
  uint64_t previous = 0;
  for (int world : {1, 2, 3, 4, 8, 16}) {
    const uint64_t outside = budget_for(h100, {.world_size = world}).outside_bytes;
    EXPECT_GE(outside, previous) << world;
    previous = outside;
  }
  EXPECT_LT(budget_for(h100, {.world_size = 1}).outside_bytes, two.outside_bytes);
  EXPECT_LT(two.outside_bytes, four.outside_bytes);
  EXPECT_LT(four.outside_bytes, eight.outside_bytes);
}

TEST(DeviceBudget, BoardsWithoutNvSwitchHaveNoNvlsLine) {
  const DeviceBudget a100 = budget_for(preset("a100-80gb"), {.world_size = 8});
  EXPECT_EQ(line(a100, "nccl.nvls_buffers"), nullptr);
  EXPECT_EQ(line(a100, "nccl.ring_buffers")->bytes, 24 * 12 * kMiB);
  EXPECT_EQ(a100.outside_bytes, (416 + 288 + 288 + 400) * kMiB);
}

TEST(DeviceBudget, GeForceRingsLiveInHostMemory) {
  const DeviceBudget b = budget_for(preset("rtx4090-24gb"), {.world_size = 4});
  EXPECT_EQ(line(b, "nccl.ring_buffers")->bytes, 0u);
  EXPECT_EQ(line(b, "nccl.tree_buffers")->bytes, 0u);
  EXPECT_NE(line(b, "nccl.ring_buffers")->source.find("SHM"), std::string::npos);
  EXPECT_EQ(b.outside_bytes, (416 + 400) * kMiB);
}

TEST(DeviceBudget, CommunicatorsMultiplyTheNcclLines) {
  const DevicePreset& a800 = preset("a800-80gb");
  const DeviceBudget one = budget_for(a800, {.world_size = 4});
  const DeviceBudget three = budget_for(a800, {.world_size = 4, .nccl_communicators = 3});
  for (const char* name : {"nccl.ring_buffers", "nccl.tree_buffers", "nccl.comm_other"})
    EXPECT_EQ(line(three, name)->bytes, 3 * line(one, name)->bytes) << name;
  EXPECT_NE(line(three, "nccl.ring_buffers")->source.find("x 3 communicators"), std::string::npos);
  // No NCCL at all: only the context and the handle, whatever the world.
  const DeviceBudget none = budget_for(a800, {.world_size = 4, .nccl_communicators = 0});
  EXPECT_EQ(line_names(none), (std::vector<std::string>{"cuda.context", "cublaslt.handle"}));
}

TEST(DeviceBudget, AnImpossibleBudgetIsRefusedNamingThePreset) {
  const DevicePreset& rtx4090 = preset("rtx4090-24gb");
  const std::string message =
      usage_error([&] { budget_for(rtx4090, {.world_size = 8, .nccl_communicators = 100}); });
  EXPECT_NE(message.find("memory.device = \"rtx4090-24gb\""), std::string::npos) << message;
  EXPECT_NE(message.find("at world size 8"), std::string::npos) << message;
  EXPECT_NE(message.find("nccl.comm_other 40000 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing is left for the allocator"), std::string::npos) << message;
}

TEST(DeviceBudget, DeviceCapacityCapsTheAllocatorBelowWhatThePresetLeaves) {
  const DevicePreset& h100 = preset("h100-80gb");
  const DeviceBudget capped = budget_for(h100, {.world_size = 8, .capacity_cap = 40 * kGiB});
  EXPECT_EQ(capped.allocator_capacity, 40 * kGiB);
  EXPECT_EQ(capped.outside_bytes, budget_for(h100, {.world_size = 8}).outside_bytes);

  const uint64_t left = budget_for(h100, {.world_size = 8}).allocator_capacity;
  EXPECT_EQ(budget_for(h100, {.world_size = 8, .capacity_cap = left}).allocator_capacity, left);
  const std::string message =
      usage_error([&] { budget_for(h100, {.world_size = 8, .capacity_cap = left + 1}); });
  EXPECT_EQ(message.rfind("memory.device_capacity: ", 0), 0u) << message;
  EXPECT_NE(message.find("memory.device = \"h100-80gb\""), std::string::npos) << message;
  EXPECT_NE(message.find("at world size 8"), std::string::npos) << message;
}

TEST(DeviceBudget, BadOptionsAreRefused) {
  const DevicePreset& l40s = preset("l40s-48gb");
  EXPECT_NE(usage_error([&] { budget_for(l40s, {.world_size = 0}); }).find("world size"),
            std::string::npos);
  EXPECT_NE(usage_error([&] {
              budget_for(l40s, {.world_size = 2, .nccl_communicators = -2});
            }).find("communicators"),
            std::string::npos);
  EXPECT_NE(
      usage_error([&] { budget_for(l40s, {.world_size = 2, .ranks_per_node = -1}); }).find("node"),
      std::string::npos);
}

TEST(DeviceBudget, TheOneCallForAResolvedConfig) {
  EXPECT_EQ(device_budget("", {.world_size = 8}), std::nullopt);
  const std::optional<DeviceBudget> b = device_budget("h200-141gb", {.world_size = 8});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->preset, find_device_preset("h200-141gb"));
  EXPECT_EQ(b->allocator_capacity,
            budget_for(preset("h200-141gb"), {.world_size = 8}).allocator_capacity);
  const std::string message = usage_error([] { device_budget("h100-80g", {}); });
  EXPECT_EQ(message,
            "memory.device: unknown device \"h100-80g\"; expected \"h100-80gb\", \"h100-94gb\", "
            "\"h200-141gb\", \"a100-40gb\", \"a100-80gb\", \"a800-80gb\", \"rtx3090-24gb\", "
            "\"rtx4090-24gb\" or \"l40s-48gb\"");
}

}  // namespace
}  // namespace headroom
