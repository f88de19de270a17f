#include "tensor/dtype.h"

#include <array>

namespace headroom {

namespace {
constexpr std::array<std::string_view, 6> kNames = {"fp32",  "bf16",  "int32",
                                                    "int64", "uint8", "fp16"};
constexpr std::array<size_t, 6> kSizes = {4, 2, 4, 8, 1, 2};
}  // namespace

size_t size_of(DType dtype) {
  return kSizes[static_cast<int>(dtype)];
}
std::string_view name_of(DType dtype) {
  return kNames[static_cast<int>(dtype)];
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace headroom
