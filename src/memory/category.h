// What a block of memory is for (category) and when it was asked for (phase).
// Both are small enums so every event carries them for free; their names are
// the strings users see in reports and in the trace's HDF5 enum types.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class Category : uint8_t {
  kParam,
  kGrad,
  kOptim,
  kActivation,
  kCheckpoint,
  kLogits,
  kAttention,
  kComm,
  kWorkspace,
};
constexpr int kNumCategories = 9;
constexpr std::array<Category, kNumCategories> kAllCategories = {
    Category::kParam,      Category::kGrad,       Category::kOptim,
    Category::kActivation, Category::kCheckpoint, Category::kLogits,
    Category::kAttention,  Category::kComm,       Category::kWorkspace,
};

// `init` covers everything before the first step (weights, optimizer states).
enum class Phase : uint8_t {
  kInit,
  kForward,
  kBackward,
  kLoss,
  kOptimizer,
  kGather,
  kReduce,
};
constexpr int kNumPhases = 7;
constexpr std::array<Phase, kNumPhases> kAllPhases = {
    Phase::kInit,      Phase::kForward, Phase::kBackward, Phase::kLoss,
    Phase::kOptimizer, Phase::kGather,  Phase::kReduce,
};

std::string_view name_of(Category category);  // "param", "grad", ...
std::string_view name_of(Phase phase);        // "init", "forward", ...
std::optional<Category> parse_category(std::string_view name);
std::optional<Phase> parse_phase(std::string_view name);

}  // namespace headroom
