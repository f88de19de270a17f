#include "memory/category.h"

namespace headroom {

namespace {
constexpr std::array<std::string_view, kNumCategories> kCategoryNames = {
    "param",  "grad",      "optim", "activation", "checkpoint",
    "logits", "attention", "comm",  "workspace",
};
constexpr std::array<std::string_view, kNumPhases> kPhaseNames = {
    "init", "forward", "backward", "loss", "optimizer", "gather", "reduce",
};
}  // namespace

std::string_view name_of(Category category) {
  return kCategoryNames[static_cast<int>(category)];
}
std::string_view name_of(Phase phase) {
  return kPhaseNames[static_cast<int>(phase)];
}

std::optional<Category> parse_category(std::string_view name) {
  for (int i = 0; i < kNumCategories; ++i)
    if (kCategoryNames[i] == name) return static_cast<Category>(i);
  return std::nullopt;
}

std::optional<Phase> parse_phase(std::string_view name) {
  for (int i = 0; i < kNumPhases; ++i)
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  return std::nullopt;
}

}  // namespace headroom
