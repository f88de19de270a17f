// The cross-backend op harness, after ggml's test-backend-ops: one case type
// per op (backend/op.h), each a list of instances (shape, dtype, aliasing),
// and every instance runs on every backend of harness_backends().
//
//   computing backends (cpu; cuda where a device is visible) are compared
//     on values: every operand after the call against a float64 reference
//     written here in plain loops (outputs) or its contents before the call
//     (inputs must be left alone), by a normalized error; against cpu's
//     values; and, for the instances of backward ops that carry a
//     FiniteDifference, against central differences of the backend's own
//     forward in fp32.
//   planning backends (meta, one per target device) are compared on
//     allocations: exactly the allocator events of the computing backend for
//     their target, phase by phase (op_harness_test.cc says what is checked
//     for a target with no computing backend here).
//
// Everything goes through the public Backend methods (copy_from_host /
// copy_to_host for values, never Tensor::data), so a device whose memory the
// host cannot read plugs in with one registry entry and no new test code.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#ifdef HEADROOM_HAVE_CUDA
#include "backend/cuda/cuda_context.h"
#endif
#include "memory/segment_source.h"
#include "ops/op_test_util.h"

namespace headroom::backend_test {

// ---- the backends every instance runs on ----

struct HarnessBackend {
  std::string name;  // "cpu", "meta.host_cpu", "meta.cuda": in every failure message
  BackendKind kind;
  TargetDevice target;
  std::unique_ptr<SegmentSource> (*make_source)();
  // Computing backends are compared on values, planning ones on allocations.
  bool computes() const { return kind != BackendKind::kMeta; }
};

// The registry. The cuda kernel table is registered where this build has
// the CUDA toolkit and a device is visible (cudaGetDeviceCount > 0): its
// values are then compared with the float64 references and with cpu's, and
// meta.cuda's allocator events with its own (find_computing pairs them by
// target), by the same code as on cpu. Without a device it is left out, so
// the cpu machines run the other backends and the device machine all of
// them (scripts/device-check.sh). Built through make_backend(kind, target,
// allocator), the one factory.
inline std::vector<HarnessBackend> harness_backends() {
  std::vector<HarnessBackend> backends = {
      {"cpu", BackendKind::kCpu, TargetDevice::kHostCpu, make_host_source},
      {"meta.host_cpu", BackendKind::kMeta, TargetDevice::kHostCpu, make_virtual_source},
      {"meta.cuda", BackendKind::kMeta, TargetDevice::kCuda, make_virtual_source},
  };
#ifdef HEADROOM_HAVE_CUDA
  if (query_cuda_device_count().count > 0)
    backends.push_back({"cuda", BackendKind::kCuda, TargetDevice::kCuda, make_cuda_source});
#endif
  return backends;
}

// ---- error bounds ----

// The normalized error of `actual` against `expected`: max |a - e| over
// max |e| (at least kTiny, so an all-zero reference demands exact zeros).
// NaN anywhere in `actual` makes it NaN, which no bound accepts.
inline constexpr double kTiny = 1e-30;
struct NormalizedError {
  double error = 0;
  size_t worst = 0;  // the index of the largest |a - e|
};
inline NormalizedError normalized_error(const std::vector<double>& actual,
                                        const std::vector<double>& expected) {
  NormalizedError result;
  double max_ref = kTiny, max_diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(expected[i]));
    double diff = std::fabs(actual[i] - expected[i]);
    if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
    if (diff > max_diff) {
      max_diff = diff;
      result.worst = i;
    }
  }
  result.error = max_diff / max_ref;
  return result;
}

// Per dtype, against the float64 reference:
//  - fp32: the kernels accumulate in fp32 or double over at most a few
//    hundred terms of magnitude <= a few units: ~1e-6 of the largest value at
//    worst (attention's exp_approx adds ~2 ulp; cpu's largest is 5e-7); 1e-5
//    leaves room for a device that sums in another order.
//  - bf16: each output is rounded once to 8 significant bits, at most 2^-8 of
//    its value, so 2^-8 of the largest, plus the fp32 error before rounding.
//  - integer dtypes: exact.
//  - fp16: 11 significant bits, 2^-11 of the largest, plus fp32's error
//    (the cases keep fp16 values far from its range limits).
inline constexpr double kFp32Bound = 1e-5;
inline constexpr double kBf16Bound = 1.0 / 256 + kFp32Bound;
inline constexpr double kFp16Bound = 1.0 / 2048 + kFp32Bound;
inline double bound_for(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kFp32Bound;
    case DType::kBF16:
      return kBf16Bound;
    case DType::kF16:
      return kFp16Bound;
    default:
      return 0;
  }
}
// Central differences in float64 of the backend's fp32 forward, step kFdStep:
// the truncation error (h^2 / 6 |f'''|) is ~1e-5 of the gradients here and
// the fp32 noise of the loss over 2h ~3e-5 (cpu's largest: 3.3e-5); 5e-4
// leaves 15x, and a wrong gradient formula is off by O(1).
inline constexpr double kFdStep = 1e-2;
inline constexpr double kFdBound = 5e-4;

// ---- host values ----

// `x` as `dtype` stores it (bf16, fp16: fp32 then nearest even; integers: truncated).
inline double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<float>(x);
    case DType::kBF16:
      return to_float(to_bf16(static_cast<float>(x)));
    case DType::kF16:
      return to_float(to_f16(static_cast<float>(x)));
    default:
      return std::trunc(x);
  }
}
inline std::vector<double> round_to(DType dtype, std::vector<double> values) {
  for (double& x : values)
    x = round_to(dtype, x);
  return values;
}

// random_values (magnitudes in [0.25, 1], random signs) times `scale`,
// exact in `dtype`.
inline std::vector<double> random_in(DType dtype, int64_t n, uint64_t seed, double scale = 1) {
  std::vector<float> raw = random_values(n, seed);
  std::vector<double> values(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    values[i] = round_to(dtype, scale * static_cast<double>(raw[i]));
  return values;
}

// n integers uniform in [lo, hi] (for ids, targets, positions, integer dtypes).
inline std::vector<double> random_integers(int64_t n, uint64_t seed, int64_t lo, int64_t hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& x : values)
    x = static_cast<double>(dist(rng));
  return values;
}

// Host bytes of `values` in `dtype`, and back.
std::vector<uint8_t> encode(DType dtype, const std::vector<double>& values);
std::vector<double> decode(DType dtype, const std::vector<uint8_t>& bytes);

// A tensor on `be` holding `values`, uploaded with copy_from_host (meta: not
// uploaded, a plan has no values).
Tensor make_tensor(Backend& be, const Shape& shape, DType dtype, Category category,
                   std::string_view tag, const std::vector<double>& values);
// t's contents, read with copy_to_host (meta: zeros).
std::vector<double> fetch(Backend& be, const Tensor& t);

// ---- an instance: operands, the call, the reference ----

// One tensor argument of the call.
struct Operand {
  std::string role;  // "q", "d_table": also the tensor's tag
  Shape shape;
  DType dtype = DType::kF32;
  Category category = Category::kActivation;
  std::vector<double> values;  // contents before the call, exact in dtype
  bool defined = true;         // false: an undefined Tensor (frozen dw, fp32 master)
  Tensor tensor;               // on the backend, between setup and release
};

// Backward ops: the gradient the backend's backward wrote, against central
// differences of a scalar loss through the backend's forward.
struct FiniteDifference {
  // The forward's inputs, perturbed one element at a time (fp32).
  std::vector<std::vector<double>> variables;
  // The operand holding d loss / d variables[i] after the call, per variable.
  std::vector<std::string> gradients;
  // The loss, in float64, from a forward run on `be` at `variables`.
  std::function<double(Backend& be, const std::vector<std::vector<double>>& variables)> loss;
};

struct OpRun {
  // Allocated and uploaded in this order before the call, freed in reverse.
  std::vector<Operand> operands;
  // The op (or the ops: a gemm twice) on the operands' tensors.
  std::function<void(Backend&, OpRun&)> call;
  // The float64 reference: the contents of the outputs after the call, by
  // role. Every operand not named must come back as it went in.
  std::function<std::map<std::string, std::vector<double>>(const OpRun&)> reference;
  // copy_to_host only: the host buffer the call writes, compared as role
  // "host", holding host_dtype.
  std::vector<uint8_t> host_out;
  std::optional<DType> host_dtype;
  std::optional<FiniteDifference> finite_difference;
  // How many times an output is rounded to its dtype on the way: the bound
  // against float64 is this times bound_for(dtype). 1 for every op that
  // rounds once; PyTorch's dense attention backward rounds each repeated
  // head's bf16 gradient before repeat_kv's backward sums them.
  int roundings = 1;

  Operand& add(Operand operand) {
    operands.push_back(std::move(operand));
    return operands.back();
  }
  const Operand& operand(std::string_view role) const;
  Operand& operand(std::string_view role) {
    return const_cast<Operand&>(static_cast<const OpRun&>(*this).operand(role));
  }
  Tensor& t(std::string_view role) { return operand(role).tensor; }
  const std::vector<double>& v(std::string_view role) const { return operand(role).values; }
};

// Operand makers.
inline Operand given(std::string role, Shape shape, DType dtype, std::vector<double> values,
                     Category category = Category::kActivation) {
  return Operand{
      std::move(role), std::move(shape), dtype, category, round_to(dtype, values), true, {}};
}
inline Operand random_operand(std::string role, Shape shape, DType dtype, uint64_t seed,
                              double scale = 1, Category category = Category::kActivation) {
  std::vector<double> values = random_in(dtype, numel_of(shape), seed, scale);
  return Operand{std::move(role), std::move(shape), dtype, category, std::move(values), true, {}};
}
// An output the op overwrites: NaN before the call (floating dtypes), so an
// element the kernel forgets cannot pass; integers get 77.
inline Operand written(std::string role, Shape shape, DType dtype,
                       Category category = Category::kActivation) {
  double sentinel = is_floating(dtype) ? std::nan("") : 77;
  std::vector<double> values(static_cast<size_t>(numel_of(shape)), sentinel);
  return Operand{std::move(role), std::move(shape), dtype, category, std::move(values), true, {}};
}
inline Operand undefined(std::string role) {
  return Operand{std::move(role), {}, DType::kF32, Category::kActivation, {}, false, {}};
}

// One named instance of a case: "bf16_T130_H4_KV2_docs3".
struct CaseInstance {
  std::string name;
  std::function<OpRun()> build;
};

// Every instance of one op.
struct OpCase {
  Op op;
  std::vector<CaseInstance> instances;
};

// Each op's case type is a struct with
//   static constexpr Op kOp;
//   struct Params { ... };
//   static std::vector<Params> params();
//   static std::string name(const Params&);
//   static OpRun build(const Params&);
// and add_case<Case>(cases) turns it into an OpCase.
template <typename Case>
void add_case(std::vector<OpCase>& cases) {
  OpCase c{Case::kOp, {}};
  for (const typename Case::Params& p : Case::params())
    c.instances.push_back({Case::name(p), [p] { return Case::build(p); }});
  cases.push_back(std::move(c));
}

// Name pieces: "fp32", "bf16"; 0.5 -> "0p5", -1 -> "m1", 1e6 -> "1e06";
// [17, 65] -> "17x65".
std::string dtype_name(DType dtype);
std::string number_name(double x);
std::string shape_name(const Shape& shape);

}  // namespace headroom::backend_test
