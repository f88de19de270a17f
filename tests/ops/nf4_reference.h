// NF4 from its definition, for the tests: the 16 values as QLoRA defines
// them (bitsandbytes' create_normal_map(offset = 0.9677083, use_extra_value
// = True)), computed here in float64 with an inverse normal CDF of our own,
// independent of the kernels' fp32 table (backend/common/nf4.h):
//   positives = Phi^-1(linspace(offset, 1/2, 9)[:-1])   8 values
//   negatives = -Phi^-1(linspace(offset, 1/2, 8)[:-1])  7 values
//   values    = sorted(positives, 0, negatives) / Phi^-1(offset)
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace headroom::backend_test {

// Phi^-1(p) for p in (0, 1), by bisection on Phi(x) = erfc(-x / sqrt 2) / 2
// to the last bit of a double.
inline double inverse_normal_cdf(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

inline std::vector<double> reference_nf4_values() {
  const double offset = 0.9677083;
  auto linspace = [](double a, double b, int n, int i) { return a + (b - a) * i / (n - 1); };
  std::vector<double> values = {0.0};
  for (int i = 0; i < 8; ++i)
    values.push_back(inverse_normal_cdf(linspace(offset, 0.5, 9, i)));
  for (int i = 0; i < 7; ++i)
    values.push_back(-inverse_normal_cdf(linspace(offset, 0.5, 8, i)));
  std::sort(values.begin(), values.end());
  const double largest = values.back();
  for (double& v : values)
    v /= largest;
  return values;
}

// The code of the value nearest x (ties low).
inline int reference_nf4_code(const std::vector<double>& values, double x) {
  int best = 0;
  for (int c = 1; c < 16; ++c)
    if (std::fabs(values[static_cast<size_t>(c)] - x) <
        std::fabs(values[static_cast<size_t>(best)] - x))
      best = c;
  return best;
}

}  // namespace headroom::backend_test
