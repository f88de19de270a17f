#include "backend/common/dynamic_map.h"

#include <algorithm>
#include <vector>

namespace headroom {

namespace {

// torch.linspace(0.1, 1, n, dtype=torch.float32) on cpu.
std::vector<float> linspace(int n) {
  const float start = 0.1f, end = 1.0f;
  const float step = (end - start) / static_cast<float>(n - 1);
  std::vector<float> out(static_cast<size_t>(n));
  const int halfway = n / 2;
  for (int i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = i < halfway ? start + step * static_cast<float>(i)
                                              : end - step * static_cast<float>(n - i - 1);
  return out;
}

std::array<float, 256> make_map(bool is_signed) {
  std::vector<float> data;
  // Python's 10 ** (i - 6), a double that torch rounds to fp32 as the
  // multiplier of an fp32 tensor.
  const double powers[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  for (int i = 0; i < 7; ++i) {
    const int n = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    const std::vector<float> b = linspace(n);
    const float scale = static_cast<float>(powers[i]);
    for (int j = 0; j + 1 < n; ++j) {
      const float mean = (b[static_cast<size_t>(j)] + b[static_cast<size_t>(j + 1)]) / 2.0f;
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-scale * mean);
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  std::array<float, 256> map{};
  std::copy(data.begin(), data.end(), map.begin());
  return map;
}

}  // namespace

const std::array<float, 256>& dynamic_map(bool is_signed) {
  static const std::array<float, 256> kSigned = make_map(true);
  static const std::array<float, 256> kUnsigned = make_map(false);
  return is_signed ? kSigned : kUnsigned;
}

}  // namespace headroom
