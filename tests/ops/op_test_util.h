// Helpers shared by the op tests (tests/ops/<family>_test.cc): tensors from
// values, closeness against a float64 reference, central differences, thread
// counts that must not change a bit, and the cpu/meta parity runners (plan =
// run: the same allocator events, the same rejections).
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend_test_util.h"

namespace headroom::backend_test {

inline constexpr BackendKind kCpu = BackendKind::kCpu;
inline constexpr BackendKind kMeta = BackendKind::kMeta;

// An activation tensor holding `values` (rounded to bf16 for a bf16 dtype).
inline Tensor make(Backend& be, const Shape& shape, DType dtype, const std::vector<float>& values,
                   std::string_view tag) {
  Tensor t = be.empty(shape, dtype, Category::kActivation, tag);
  upload(t, values);
  return t;
}

// An input on either backend (fill_uniform is a no-op on meta).
inline Tensor input(Backend& be, const Shape& shape, DType dtype, std::string_view tag,
                    uint64_t seed) {
  Tensor t = be.empty(shape, dtype, Category::kActivation, tag);
  be.fill_uniform(t, seed, -1.0f, 1.0f);
  return t;
}

// Every actual[i] within atol + rtol * |expected[i]| (NaN never is); reports
// the first five misses.
inline void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                         double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int misses = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::fabs(actual[i] - expected[i]) <= atol + rtol * std::fabs(expected[i])) &&
        ++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "]: " << actual[i] << " vs expected " << expected[i];
  EXPECT_EQ(misses, 0) << what;
}

// (f(v + h) - f(v - h)) / 2h, f reading `variable` through a reference;
// `variable` is restored.
inline double central_difference(const std::function<double()>& f, double& variable, double h) {
  double saved = variable;
  variable = saved + h;
  double up = f();
  variable = saved - h;
  double down = f();
  variable = saved;
  return (up - down) / (2 * h);
}

// Runs `op` on 1 thread and on 2, 3 and 4 (more than this machine's cores
// is fine) and returns the bytes each left in `out`; restores the thread count.
inline std::vector<std::vector<uint8_t>> bytes_per_thread_count(const std::function<void()>& reset,
                                                                const std::function<void()>& op,
                                                                const Tensor& out) {
  std::vector<std::vector<uint8_t>> results;
  int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    reset();
    op();
    const auto* p = static_cast<const uint8_t*>(out.raw());
    results.emplace_back(p, p + out.nbytes());
  }
  omp_set_num_threads(saved);
  return results;
}

// Calls on a backend, run once on cpu and once on meta.
using Scenario = std::function<void(Backend&)>;

// The allocator events `scenario` makes on a fresh backend of `kind`.
inline std::vector<EventRecord> record(BackendKind kind, const Scenario& scenario) {
  BackendUnderTest under_test(kind);
  EventRecorder recorder(under_test.allocator);
  scenario(*under_test.backend);
  return recorder.events();
}

// Plan = run: the same allocator events, in order, on cpu and meta.
inline void expect_same_events(const Scenario& scenario) {
  std::vector<EventRecord> cpu = record(kCpu, scenario);
  std::vector<EventRecord> meta = record(kMeta, scenario);
  ASSERT_FALSE(cpu.empty());
  for (size_t i = 0; i < std::min(cpu.size(), meta.size()); ++i)
    ASSERT_EQ(cpu[i], meta[i]) << "event " << i << ": cpu " << to_string(cpu[i]) << ", meta "
                               << to_string(meta[i]);
  ASSERT_EQ(cpu.size(), meta.size());
}

// The call is rejected on cpu and on meta with the same message, and leaves
// no allocation behind; returns the message.
inline std::string rejected_alike(const Scenario& scenario) {
  std::string messages[2];
  for (BackendKind kind : {kCpu, kMeta}) {
    BackendUnderTest under_test(kind);
    std::string& message = messages[kind == kCpu ? 0 : 1];
    try {
      scenario(*under_test.backend);
      ADD_FAILURE() << "accepted on " << name_of(kind);
    } catch (const InternalError& e) {
      message = e.what();
    }
    EXPECT_EQ(under_test.allocator.num_live_blocks(), 0u) << name_of(kind);
  }
  EXPECT_EQ(messages[0], messages[1]);
  return messages[0];
}

}  // namespace headroom::backend_test
