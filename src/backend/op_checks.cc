#include "backend/op_checks.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "util/error.h"

namespace headroom {

namespace {

// Whether x and y share a byte (an empty tensor shares none).
bool overlaps(const Tensor& x, const Tensor& y) {
  if (x.nbytes() == 0 || y.nbytes() == 0) return false;
  auto begin_x = reinterpret_cast<uintptr_t>(x.raw());
  auto begin_y = reinterpret_cast<uintptr_t>(y.raw());
  return begin_x < begin_y + y.nbytes() && begin_y < begin_x + x.nbytes();
}

template <typename T>
bool fits(float value) {
  // Truncation toward zero is what fill promises; the truncated value must be
  // representable, or the conversion is undefined behaviour.
  if (!std::isfinite(value)) return false;
  double t = std::trunc(static_cast<double>(value));
  return t >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
         t <= static_cast<double>(std::numeric_limits<T>::max());
}

}  // namespace

std::string describe_operand(const Tensor& x) {
  if (!x.defined()) return "(undefined)";
  return "'" + x.tag() + "' " + x.describe();
}

std::string describe_operand(std::string_view role, const Tensor& x) {
  return std::string(role) + " " + describe_operand(x);
}

std::string value_string(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

void fail_op(std::string_view op, const std::string& message) {
  throw InternalError(std::string(op) + ": " + message);
}

void check_operand(std::string_view op, BackendKind backend, const Tensor& x,
                   std::string_view role) {
  if (!x.defined()) fail_op(op, std::string(role) + " is an undefined tensor");
  if (x.backend() != backend)
    fail_op(op, describe_operand(role, x) + " lives on " + std::string(name_of(x.backend())) +
                    ", not on " + std::string(name_of(backend)));
}

void check_floating(std::string_view op, const Tensor& x, std::string_view role) {
  if (!is_floating(x.dtype()))
    fail_op(op, describe_operand(role, x) + " must be fp32, bf16 or fp16");
}

void check_dtype(std::string_view op, const Tensor& x, std::string_view role, DType dtype) {
  if (x.dtype() != dtype)
    fail_op(op, describe_operand(role, x) + " must be " + std::string(name_of(dtype)));
}

void check_rank(std::string_view op, const Tensor& x, std::string_view role, int64_t rank,
                std::string_view layout) {
  if (x.dim() != rank)
    fail_op(op, describe_operand(role, x) + " must be " + std::to_string(rank) + "-D " +
                    std::string(layout));
}

void check_same_shape(std::string_view op, const Tensor& x, std::string_view x_role,
                      const Tensor& y, std::string_view y_role) {
  if (x.shape() != y.shape())
    fail_op(op, "shape mismatch: " + describe_operand(x_role, x) + " vs " +
                    describe_operand(y_role, y));
}

void check_same_dtype(std::string_view op, const Tensor& x, std::string_view x_role,
                      const Tensor& y, std::string_view y_role) {
  if (x.dtype() != y.dtype())
    fail_op(op, "dtype mismatch: " + describe_operand(x_role, x) + " vs " +
                    describe_operand(y_role, y));
}

void check_disjoint(std::string_view op, const Tensor& x, std::string_view x_role, const Tensor& y,
                    std::string_view y_role) {
  if (overlaps(x, y))
    fail_op(op, describe_operand(x_role, x) + " overlaps " + describe_operand(y_role, y));
}

void check_identical_or_disjoint(std::string_view op, const Tensor& x, std::string_view x_role,
                                 const Tensor& y, std::string_view y_role) {
  bool identical = x.raw() == y.raw() && x.nbytes() == y.nbytes();
  if (overlaps(x, y) && !identical)
    fail_op(op, describe_operand(x_role, x) + " partially overlaps " + describe_operand(y_role, y));
}

void check_fill(BackendKind backend, const Tensor& x, float value) {
  check_operand("fill", backend, x, "x");
  bool ok = true;
  switch (x.dtype()) {
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16:
      break;
    case DType::kI32:
      ok = fits<int32_t>(value);
      break;
    case DType::kI64:
      ok = fits<int64_t>(value);
      break;
    case DType::kU8:
      ok = fits<uint8_t>(value);
      break;
  }
  if (!ok)
    fail_op("fill", "value " + value_string(value) + " does not fit x " + describe_operand(x));
}

void check_fill_uniform(BackendKind backend, const Tensor& x, float lo, float hi) {
  check_operand("fill_uniform", backend, x, "x");
  check_floating("fill_uniform", x, "x");
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && std::isfinite(hi - lo)))
    fail_op("fill_uniform", "bad range [" + value_string(lo) + ", " + value_string(hi) +
                                "] for x " + describe_operand(x));
}

void check_copy(BackendKind backend, const Tensor& src, const Tensor& dst) {
  check_operand("copy", backend, src, "src");
  check_operand("copy", backend, dst, "dst");
  check_same_shape("copy", src, "src", dst, "dst");
  check_same_dtype("copy", src, "src", dst, "dst");
  check_identical_or_disjoint("copy", src, "src", dst, "dst");
}

bool is_supported_cast(DType from, DType to) {
  if (is_floating(from) && is_floating(to)) return true;
  return to == DType::kF32 || from == to;
}

void check_cast(BackendKind backend, const Tensor& x, DType dtype) {
  check_operand("cast", backend, x, "x");
  if (!is_supported_cast(x.dtype(), dtype))
    fail_op("cast",
            "no conversion from x " + describe_operand(x) + " to " + std::string(name_of(dtype)));
}

void check_add(BackendKind backend, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_operand("add", backend, a, "a");
  check_operand("add", backend, b, "b");
  check_operand("add", backend, out, "out");
  check_floating("add", a, "a");
  check_same_shape("add", a, "a", b, "b");
  check_same_shape("add", a, "a", out, "out");
  check_same_dtype("add", a, "a", b, "b");
  check_same_dtype("add", a, "a", out, "out");
  check_identical_or_disjoint("add", out, "out", a, "a");
  check_identical_or_disjoint("add", out, "out", b, "b");
}

GemmDims check_gemm(BackendKind backend, const Tensor& a, bool transpose_a, const Tensor& b,
                    bool transpose_b, const Tensor& c) {
  check_operand("gemm", backend, a, "a");
  check_operand("gemm", backend, b, "b");
  check_operand("gemm", backend, c, "c");
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2)
    fail_op("gemm", "operands must be 2-D: a " + describe_operand(a) + ", b " +
                        describe_operand(b) + ", c " + describe_operand(c));
  check_floating("gemm", a, "a");
  check_same_dtype("gemm", a, "a", b, "b");
  if (c.dtype() != DType::kF32 && c.dtype() != a.dtype())
    fail_op("gemm",
            "c " + describe_operand(c) + " must be fp32 or the dtype of a " + describe_operand(a));
  GemmDims d;
  d.m = transpose_a ? a.size(1) : a.size(0);
  d.k = transpose_a ? a.size(0) : a.size(1);
  int64_t k_b = transpose_b ? b.size(1) : b.size(0);
  d.n = transpose_b ? b.size(0) : b.size(1);
  auto op_name = [](const Tensor& x, bool t) {
    return describe_operand(x) + (t ? " (transposed)" : "");
  };
  if (k_b != d.k)
    fail_op("gemm", "inner dimensions differ: a " + op_name(a, transpose_a) +
                        " has k = " + std::to_string(d.k) + ", b " + op_name(b, transpose_b) +
                        " has k = " + std::to_string(k_b));
  if (c.size(0) != d.m || c.size(1) != d.n)
    fail_op("gemm", "c " + describe_operand(c) + " is not [" + std::to_string(d.m) + ", " +
                        std::to_string(d.n) + "] = rows of a " + op_name(a, transpose_a) +
                        " by columns of b " + op_name(b, transpose_b));
  // oneDNN (and cuBLAS) read A and B while they write C.
  check_disjoint("gemm", c, "c", a, "a");
  check_disjoint("gemm", c, "c", b, "b");
  return d;
}

}  // namespace headroom
