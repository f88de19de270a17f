// The op harness (op_harness.h): every instance of every op's case, on
// every backend of harness_backends(), as one test named
// OpHarness.<op>/<instance>, e.g. OpHarness.attention_backward/bf16_T130_H4_KV2_D16_docs3.
//
// Per instance and backend, on a fresh allocator and backend: setup (the
// operands allocated and uploaded), call, fetch (every operand read back),
// release (the operands freed), teardown (the backend destroyed); the
// allocator events of each phase are recorded. Then:
//   - each computing backend: every operand within bound_for(dtype) of the
//     float64 reference (outputs) or of its value before the call (inputs);
//     a backend other than cpu also within twice that of cpu's values; the
//     finite-difference instances of backward ops within kFdBound of central
//     differences through the backend's forward.
//   - each planning backend with target X: the events of every phase exactly
//     those of the computing backend for X (action, bytes, category, tag,
//     order, segments included). For the cuda target while no cuda backend
//     is registered: cpu's events for every op but gemm (their scratch is
//     device-neutral, backend/target_device.h); for gemm, cpu's events for
//     the operands, and in place of cpu's oneDNN scratch exactly one
//     `cublaslt.workspace` of kCublasLtWorkspaceBytes taken on the first
//     call and freed with the backend.
//   - a backend whose supports(op) is false is not run: the test ends in
//     GTEST_SKIP naming it (after the other backends' checks, so a failure
//     still fails).
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <sstream>

#include "op_cases.h"

namespace headroom::backend_test {
namespace {

using Values = std::map<std::string, std::vector<double>>;

enum Phase { kSetup, kCall, kFetch, kRelease, kTeardown, kPhaseCount };
constexpr const char* kPhaseNames[kPhaseCount] = {"setup", "call", "fetch", "release", "teardown"};
using PhaseEvents = std::array<std::vector<EventRecord>, kPhaseCount>;

// What one backend did with one instance.
struct BackendRun {
  bool supported = false;
  PhaseEvents events;
  Values results;  // every operand after the call (and "host"), as fetched
};

void setup(Backend& be, OpRun& run) {
  for (Operand& o : run.operands)
    if (o.defined) o.tensor = make_tensor(be, o.shape, o.dtype, o.category, o.role, o.values);
}

Values fetch_all(Backend& be, const OpRun& run) {
  Values results;
  for (const Operand& o : run.operands)
    if (o.tensor.defined()) results[o.role] = fetch(be, o.tensor);
  if (run.host_dtype) results["host"] = decode(*run.host_dtype, run.host_out);
  return results;
}

void release(OpRun& run) {
  for (auto o = run.operands.rbegin(); o != run.operands.rend(); ++o)
    o->tensor = Tensor();
}

BackendRun run_on(const HarnessBackend& hb, Op op, const CaseInstance& instance) {
  BackendRun result;
  Allocator allocator(hb.make_source(), AllocatorOptions{});
  EventRecorder recorder(allocator);
  std::unique_ptr<Backend> be = make_backend(hb.kind, hb.target, allocator);
  if (!be->supports(op)) return result;
  result.supported = true;
  OpRun run = instance.build();
  size_t mark = 0;
  auto end_phase = [&](Phase phase) {
    const std::vector<EventRecord>& events = recorder.events();
    result.events[phase].assign(events.begin() + static_cast<std::ptrdiff_t>(mark), events.end());
    mark = events.size();
  };
  setup(*be, run);
  end_phase(kSetup);
  run.call(*be, run);
  end_phase(kCall);
  result.results = fetch_all(*be, run);
  end_phase(kFetch);
  release(run);
  end_phase(kRelease);
  be.reset();
  end_phase(kTeardown);
  return result;
}

std::string describe_error(const NormalizedError& e, const std::vector<double>& actual,
                           const std::vector<double>& expected, double bound) {
  std::ostringstream s;
  s.precision(9);
  s << "normalized error " << e.error << " > bound " << bound << " (worst element " << e.worst
    << " of " << expected.size() << ": " << actual[e.worst] << " vs " << expected[e.worst] << ")";
  return s.str();
}

// Every operand of `run` in `actual` against `expected` (the reference for
// outputs, the contents before the call for the rest), within `factor` times
// its dtype's bound. Returns the largest normalized error of a floating operand.
double expect_values(const std::string& what, const OpRun& run, const Values& actual,
                     const Values& expected, double factor) {
  double worst = 0;
  auto check = [&](const std::string& role, DType dtype, const std::vector<double>& want) {
    auto got = actual.find(role);
    if (got == actual.end()) {
      ADD_FAILURE() << what << ": " << role << " was not produced";
      return;
    }
    if (got->second.size() != want.size()) {
      ADD_FAILURE() << what << ": " << role << " has " << got->second.size() << " elements, "
                    << want.size() << " expected";
      return;
    }
    const double bound = factor * bound_for(dtype);
    NormalizedError e = normalized_error(got->second, want);
    if (is_floating(dtype)) worst = std::max(worst, e.error);
    EXPECT_LE(e.error, bound) << what << ": " << role << " (" << dtype_name(dtype)
                              << "): " << describe_error(e, got->second, want, bound);
  };
  for (const auto& [role, values] : expected)
    if (role != "host") run.operand(role);  // a reference for an operand that does not exist
  for (const Operand& o : run.operands) {
    auto reference = expected.find(o.role);
    if (reference != expected.end())
      check(o.role, o.dtype, reference->second);
    else if (o.defined)
      check(o.role, o.dtype, o.values);  // an input: left alone
  }
  if (run.host_dtype) check("host", *run.host_dtype, expected.at("host"));
  return worst;
}

std::string short_number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", x);
  return buffer;
}

void expect_finite_differences(const HarnessBackend& hb, const CaseInstance& instance) {
  Allocator allocator(hb.make_source(), AllocatorOptions{});
  std::unique_ptr<Backend> be = make_backend(hb.kind, hb.target, allocator);
  OpRun run = instance.build();
  setup(*be, run);
  run.call(*be, run);
  FiniteDifference& fd = *run.finite_difference;
  std::vector<std::vector<double>> variables = fd.variables;
  auto loss = [&] { return fd.loss(*be, variables); };
  for (size_t v = 0; v < variables.size(); ++v) {
    std::vector<double> analytic = fetch(*be, run.t(fd.gradients[v]));
    std::vector<double> numeric(variables[v].size());
    for (size_t i = 0; i < numeric.size(); ++i)
      numeric[i] = central_difference(loss, variables[v][i], kFdStep);
    ASSERT_EQ(analytic.size(), numeric.size()) << fd.gradients[v];
    NormalizedError e = normalized_error(analytic, numeric);
    ::testing::Test::RecordProperty(hb.name + ".fd_error." + fd.gradients[v],
                                    short_number(e.error));
    EXPECT_LE(e.error, kFdBound) << hb.name << ": " << fd.gradients[v]
                                 << " against central differences of the forward: "
                                 << describe_error(e, analytic, numeric, kFdBound);
  }
}

void expect_same_events(const std::string& what, const std::vector<EventRecord>& actual,
                        const std::vector<EventRecord>& expected) {
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i)
    if (actual[i] != expected[i]) {
      ADD_FAILURE() << what << ", event " << i << ": " << to_string(actual[i]) << ", expected "
                    << to_string(expected[i]);
      return;
    }
  if (actual.size() != expected.size()) {
    const bool extra = actual.size() > expected.size();
    ADD_FAILURE() << what << ": " << actual.size() << " events, expected " << expected.size()
                  << "; first unmatched: "
                  << to_string(
                         (extra ? actual : expected)[std::min(actual.size(), expected.size())])
                  << (extra ? " (made, not expected)" : " (expected, not made)");
  }
}

void expect_same_phases(const std::string& what, const PhaseEvents& actual,
                        const PhaseEvents& expected) {
  for (int p = 0; p < kPhaseCount; ++p)
    expect_same_events(what + ", phase " + kPhaseNames[p], actual[p], expected[p]);
}

// Blocks only: segments follow from them, and once the workspace has taken a
// segment of its own the two allocators' segments legitimately differ.
std::vector<EventRecord> blocks_only(const std::vector<EventRecord>& events) {
  std::vector<EventRecord> blocks;
  for (const EventRecord& e : events)
    if (std::get<0>(e) == MemoryAction::kAlloc || std::get<0>(e) == MemoryAction::kFree)
      blocks.push_back(e);
  return blocks;
}

// meta.cuda's gemm against cpu's events (see the top of this file).
void expect_cublaslt_events(const std::string& what, const PhaseEvents& actual,
                            const PhaseEvents& cpu) {
  const EventRecord alloc{MemoryAction::kAlloc, kCublasLtWorkspaceBytes, Category::kWorkspace,
                          "cublaslt.workspace"};
  const EventRecord free{MemoryAction::kFree, kCublasLtWorkspaceBytes, Category::kWorkspace,
                         "cublaslt.workspace"};
  expect_same_events(what + ", phase setup", actual[kSetup], cpu[kSetup]);
  expect_same_events(what + ", phase call (blocks)", blocks_only(actual[kCall]), {alloc});
  for (const EventRecord& e : actual[kCall])
    EXPECT_NE(std::get<0>(e), MemoryAction::kSegmentFree) << what << ": " << to_string(e);
  expect_same_events(what + ", phase fetch (blocks)", blocks_only(actual[kFetch]),
                     blocks_only(cpu[kFetch]));
  expect_same_events(what + ", phase release (blocks)", blocks_only(actual[kRelease]),
                     blocks_only(cpu[kRelease]));
  std::vector<EventRecord> teardown = blocks_only(cpu[kTeardown]);
  teardown.push_back(free);
  expect_same_events(what + ", phase teardown (blocks)", blocks_only(actual[kTeardown]), teardown);
}

const HarnessBackend* find_computing(const std::vector<HarnessBackend>& backends,
                                     const std::vector<BackendRun>& runs, TargetDevice target) {
  for (size_t i = 0; i < backends.size(); ++i)
    if (backends[i].computes() && backends[i].target == target && runs[i].supported)
      return &backends[i];
  return nullptr;
}

void run_case(Op op, const CaseInstance& instance) {
  const std::vector<HarnessBackend> backends = harness_backends();
  std::vector<BackendRun> runs;
  std::vector<std::string> skipped;
  for (const HarnessBackend& hb : backends) {
    try {
      runs.push_back(run_on(hb, op, instance));
    } catch (const std::exception& e) {
      FAIL() << hb.name << ": " << e.what();
    }
    if (!runs.back().supported) skipped.push_back(hb.name);
  }
  auto run_of = [&](const HarnessBackend* hb) -> const BackendRun& {
    return runs[static_cast<size_t>(hb - backends.data())];
  };
  const HarnessBackend* cpu = find_computing(backends, runs, TargetDevice::kHostCpu);
  ASSERT_NE(cpu, nullptr) << "cpu, the reference of every other backend, does not run "
                          << name_of(op);

  // Values.
  const OpRun built = instance.build();
  const Values reference = built.reference(built);
  for (const HarnessBackend& hb : backends) {
    const BackendRun& run = run_of(&hb);
    if (!hb.computes() || !run.supported) continue;
    double worst = expect_values(hb.name + " vs float64", built, run.results, reference,
                                 static_cast<double>(built.roundings));
    ::testing::Test::RecordProperty(hb.name + ".normalized_error", short_number(worst));
    if (&hb != cpu)
      expect_values(hb.name + " vs cpu", built, run.results, run_of(cpu).results, 2.0);
    if (built.finite_difference) {
      try {
        expect_finite_differences(hb, instance);
      } catch (const std::exception& e) {
        ADD_FAILURE() << hb.name << " (finite differences): " << e.what();
      }
    }
  }

  // Allocations.
  for (const HarnessBackend& hb : backends) {
    if (hb.computes() || !run_of(&hb).supported) continue;
    const std::string what = hb.name;
    if (const HarnessBackend* twin = find_computing(backends, runs, hb.target)) {
      expect_same_phases(what + " vs " + twin->name, run_of(&hb).events, run_of(twin).events);
    } else if (hb.target == TargetDevice::kCuda && (op == Op::kGemm || op == Op::kGemmBias)) {
      expect_cublaslt_events(what + " vs cpu with cuBLASLt's workspace", run_of(&hb).events,
                             run_of(cpu).events);
    } else if (hb.target == TargetDevice::kCuda) {
      expect_same_phases(what + " vs cpu (device-neutral)", run_of(&hb).events, run_of(cpu).events);
    } else {
      ADD_FAILURE() << what << ": no computing backend for target " << name_of(hb.target);
    }
  }

  if (!skipped.empty()) {
    std::string names;
    for (const std::string& name : skipped)
      names += (names.empty() ? "" : ", ") + name;
    GTEST_SKIP() << name_of(op) << " is not supported by: " << names
                 << " (the other backends were checked)";
  }
}

class OpHarnessTest : public ::testing::Test {
 public:
  OpHarnessTest(Op op, CaseInstance instance) : op_(op), instance_(std::move(instance)) {}
  void TestBody() override { run_case(op_, instance_); }

 private:
  Op op_;
  CaseInstance instance_;
};

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A new Op without a case fails here, and so does a case list that repeats a
// name or uses characters a gtest filter would misread.
TEST(OpHarness, EveryOpHasACase) {
  const std::vector<OpCase> cases = all_cases();
  for (Op op : all_ops()) {
    int found = 0;
    for (const OpCase& c : cases)
      if (c.op == op) {
        ++found;
        EXPECT_FALSE(c.instances.empty()) << name_of(op) << ": a case with no instances";
        std::set<std::string> names;
        for (const CaseInstance& instance : c.instances) {
          EXPECT_TRUE(valid_name(instance.name)) << name_of(op) << "/" << instance.name;
          EXPECT_TRUE(names.insert(instance.name).second)
              << name_of(op) << "/" << instance.name << " twice";
        }
      }
    EXPECT_EQ(found, 1) << name_of(op) << ": every op needs exactly one case type in op_cases_*.cc";
  }
  EXPECT_EQ(cases.size(), static_cast<size_t>(kOpCount));
}

// Every planning backend has something to be compared with, and every entry
// can be made.
TEST(OpHarness, RegistryIsComplete) {
  const std::vector<HarnessBackend> backends = harness_backends();
  std::set<std::string> names;
  bool host_cpu_computes = false;
  for (const HarnessBackend& hb : backends) {
    EXPECT_TRUE(names.insert(hb.name).second) << hb.name << " twice";
    host_cpu_computes |= hb.computes() && hb.target == TargetDevice::kHostCpu;
    Allocator allocator(hb.make_source(), AllocatorOptions{});
    EXPECT_NO_THROW(make_backend(hb.kind, hb.target, allocator)) << hb.name;
  }
  EXPECT_TRUE(host_cpu_computes) << "cpu is the reference every other backend is compared with";
  for (const HarnessBackend& hb : backends) {
    if (hb.computes()) continue;
    bool twin = false;
    for (const HarnessBackend& other : backends)
      twin |= other.computes() && other.target == hb.target;
    EXPECT_TRUE(twin || hb.target == TargetDevice::kCuda)
        << hb.name << ": no computing backend for its target " << name_of(hb.target);
  }
}

bool register_cases() {
  for (const OpCase& c : all_cases())
    for (const CaseInstance& instance : c.instances) {
      std::string name = std::string(name_of(c.op)) + "/" + instance.name;
      ::testing::RegisterTest(
          "OpHarness", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
          [op = c.op, instance]() -> ::testing::Test* { return new OpHarnessTest(op, instance); });
    }
  return true;
}

// gtest's own TEST() registers the same way, from a static initializer.
[[maybe_unused]] const bool kRegistered = register_cases();

}  // namespace
}  // namespace headroom::backend_test
