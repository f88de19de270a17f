// Helpers shared by the backend tests: a backend over its own allocator,
// random never-zero inputs, host <-> tensor transfers, and an allocator
// observer that records events in the form plan and run must agree on.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "memory/allocator.h"
#include "memory/segment_source.h"
#include "util/error.h"

namespace headroom::backend_test {

// A backend and the caching allocator it draws from: host memory for cpu,
// virtual addresses for meta (as `headroom plan` sets them up).
struct BackendUnderTest {
  explicit BackendUnderTest(BackendKind kind)
      : allocator(kind == BackendKind::kMeta ? make_virtual_source() : make_host_source(),
                  AllocatorOptions{}),
        backend(kind == BackendKind::kMeta ? make_meta_backend(allocator)
                                           : make_cpu_backend(allocator)) {}
  Allocator allocator;
  std::unique_ptr<Backend> backend;
};

// Magnitudes in [0.25, 1] with random signs: never zero, so a kernel that
// skips or drops an element cannot pass by accident, and no catastrophic
// growth in long sums.
inline std::vector<float> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.25f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v)
    x = (rng() & 1) ? magnitude(rng) : -magnitude(rng);
  return v;
}

// Writes fp32 values into an fp32 or bf16 tensor (bf16: rounded to nearest even).
inline void upload(Tensor& t, const std::vector<float>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), t.numel());
  if (t.dtype() == DType::kF32) {
    std::copy(values.begin(), values.end(), t.data<float>());
  } else {
    bf16* p = t.data<bf16>();
    for (size_t i = 0; i < values.size(); ++i)
      p[i] = to_bf16(values[i]);
  }
}

// An fp32 or bf16 tensor's values, exactly, as doubles.
inline std::vector<double> download(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype() == DType::kF32 ? static_cast<double>(t.data<float>()[i])
                                    : static_cast<double>(to_float(t.data<bf16>()[i]));
  return v;
}

// One allocator event as plan and run must share it: addresses and times
// differ by design, everything else must not.
using EventRecord = std::tuple<MemoryAction, uint64_t, Category, std::string>;

class EventRecorder final : public MemoryObserver {
 public:
  explicit EventRecorder(Allocator& allocator) : allocator_(allocator) {
    allocator_.add_observer(this);
  }
  ~EventRecorder() override { allocator_.remove_observer(this); }
  void on_memory_event(const MemoryEvent& e) override {
    events_.emplace_back(e.action, e.bytes, e.category, allocator_.tags().at(e.tag_id));
  }
  const std::vector<EventRecord>& events() const { return events_; }

 private:
  Allocator& allocator_;
  std::vector<EventRecord> events_;
};

inline std::string to_string(const EventRecord& e) {
  static const char* kActions[] = {"alloc", "free", "segment_alloc", "segment_free", "oom"};
  return std::string(kActions[static_cast<int>(std::get<0>(e))]) + " " +
         std::to_string(std::get<1>(e)) + " " + std::string(name_of(std::get<2>(e))) + " '" +
         std::get<3>(e) + "'";
}

}  // namespace headroom::backend_test
