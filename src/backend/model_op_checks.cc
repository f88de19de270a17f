#include "backend/model_op_checks.h"

#include <cmath>
#include <utility>
#include <vector>

#include "backend/op_checks.h"

namespace headroom {

namespace {

// x's size along `dim` must equal `expected`, which is `source`'s size.
void check_size(std::string_view op, const Tensor& x, std::string_view x_role, int64_t dim,
                int64_t expected, const Tensor& source, std::string_view source_role) {
  if (x.size(dim) != expected)
    fail_op(op, "shape mismatch: " + describe_operand(x_role, x) + " vs " +
                    describe_operand(source_role, source));
}

void check_host_pointer(std::string_view op, const void* pointer, std::string_view role,
                        const Tensor& x, std::string_view x_role) {
  if (pointer == nullptr && x.nbytes() > 0)
    fail_op(op, std::string(role) + " is null for " + describe_operand(x_role, x));
}

}  // namespace

void check_copy_from_host(BackendKind backend, const void* src, const Tensor& dst) {
  check_operand("copy_from_host", backend, dst, "dst");
  check_host_pointer("copy_from_host", src, "host src", dst, "dst");
}

void check_copy_to_host(BackendKind backend, const Tensor& src, const void* dst) {
  check_operand("copy_to_host", backend, src, "src");
  check_host_pointer("copy_to_host", dst, "host dst", src, "src");
}

void check_scale(BackendKind backend, const Tensor& x) {
  check_operand("scale", backend, x, "x");
  check_floating("scale", x, "x");
}

void check_sum_squares(BackendKind backend, const Tensor& x, const Tensor& out) {
  constexpr std::string_view op = "sum_squares";
  check_operand(op, backend, x, "x");
  check_operand(op, backend, out, "out");
  check_floating(op, x, "x");
  check_dtype(op, out, "out", DType::kF32);
  if (out.shape() != Shape{1}) fail_op(op, describe_operand("out", out) + " must be [1]");
  check_disjoint(op, out, "out", x, "x");
}

void check_dropout(BackendKind backend, const Tensor& x, float p, const Tensor& out) {
  constexpr std::string_view op = "dropout";
  check_operand(op, backend, x, "x");
  check_operand(op, backend, out, "out");
  check_floating(op, x, "x");
  check_same_shape(op, x, "x", out, "out");
  check_same_dtype(op, x, "x", out, "out");
  if (!(p >= 0 && p < 1))  // false for NaN
    fail_op(op, "p " + value_string(p) + " must be in [0, 1) (x " + describe_operand(x) + ")");
  check_identical_or_disjoint(op, out, "out", x, "x");
}

void check_embedding_forward(BackendKind backend, const Tensor& table, const Tensor& ids,
                             const Tensor& out) {
  constexpr std::string_view op = "embedding_forward";
  check_operand(op, backend, table, "table");
  check_operand(op, backend, ids, "ids");
  check_operand(op, backend, out, "out");
  check_rank(op, table, "table", 2, "(V, C)");
  check_floating(op, table, "table");
  check_rank(op, ids, "ids", 1, "(T)");
  check_dtype(op, ids, "ids", DType::kI32);
  check_rank(op, out, "out", 2, "(T, C)");
  check_same_dtype(op, table, "table", out, "out");
  check_size(op, out, "out", 0, ids.size(0), ids, "ids");
  check_size(op, out, "out", 1, table.size(1), table, "table");
  check_disjoint(op, out, "out", table, "table");
  check_disjoint(op, out, "out", ids, "ids");
}

void check_embedding_backward(BackendKind backend, const Tensor& d_out, const Tensor& ids,
                              const Tensor& d_table) {
  constexpr std::string_view op = "embedding_backward";
  check_operand(op, backend, d_out, "d_out");
  check_operand(op, backend, ids, "ids");
  check_operand(op, backend, d_table, "d_table");
  check_rank(op, d_out, "d_out", 2, "(T, C)");
  check_floating(op, d_out, "d_out");
  check_rank(op, ids, "ids", 1, "(T)");
  check_dtype(op, ids, "ids", DType::kI32);
  check_rank(op, d_table, "d_table", 2, "(V, C)");
  check_same_dtype(op, d_out, "d_out", d_table, "d_table");
  check_size(op, d_out, "d_out", 0, ids.size(0), ids, "ids");
  check_size(op, d_table, "d_table", 1, d_out.size(1), d_out, "d_out");
  check_disjoint(op, d_table, "d_table", d_out, "d_out");
  check_disjoint(op, d_table, "d_table", ids, "ids");
}

Tensor allocate_embedding_backward_order(Backend& backend, const Tensor& ids) {
  return backend.empty({ids.size(0)}, DType::kI32, Category::kWorkspace,
                       "embedding_backward.order");
}

void check_rmsnorm_forward(BackendKind backend, const Tensor& x, const Tensor& w, float eps,
                           const Tensor& y, const Tensor& rstd) {
  constexpr std::string_view op = "rmsnorm_forward";
  check_operand(op, backend, x, "x");
  check_operand(op, backend, w, "w");
  check_operand(op, backend, y, "y");
  check_operand(op, backend, rstd, "rstd");
  check_rank(op, x, "x", 2, "(N, C)");
  check_floating(op, x, "x");
  check_rank(op, w, "w", 1, "(C)");
  check_same_dtype(op, x, "x", w, "w");
  check_size(op, w, "w", 0, x.size(1), x, "x");
  check_same_shape(op, x, "x", y, "y");
  check_same_dtype(op, x, "x", y, "y");
  check_dtype(op, rstd, "rstd", DType::kF32);
  if (rstd.shape() != Shape{x.size(0)})
    fail_op(op, "shape mismatch: " + describe_operand("rstd", rstd) + " vs " +
                    describe_operand("x", x));
  if (!(std::isfinite(eps) && eps >= 0))
    fail_op(op, "eps " + value_string(eps) + " must be finite and >= 0 (x " + describe_operand(x) +
                    ")");
  check_disjoint(op, y, "y", x, "x");
  check_disjoint(op, y, "y", w, "w");
  check_disjoint(op, rstd, "rstd", x, "x");
  check_disjoint(op, rstd, "rstd", w, "w");
  check_disjoint(op, rstd, "rstd", y, "y");
}

void check_rmsnorm_backward(BackendKind backend, const Tensor& dy, const Tensor& x, const Tensor& w,
                            const Tensor& rstd, const Tensor& dx, const Tensor& dw) {
  constexpr std::string_view op = "rmsnorm_backward";
  check_operand(op, backend, dy, "dy");
  check_operand(op, backend, x, "x");
  check_operand(op, backend, w, "w");
  check_operand(op, backend, rstd, "rstd");
  check_operand(op, backend, dx, "dx");
  // An undefined dw is a frozen weight (LoRA): dx is still needed upstream.
  const bool has_dw = dw.defined();
  if (has_dw) check_operand(op, backend, dw, "dw");
  check_rank(op, x, "x", 2, "(N, C)");
  check_floating(op, x, "x");
  check_same_shape(op, dy, "dy", x, "x");
  check_same_dtype(op, dy, "dy", x, "x");
  check_same_shape(op, dx, "dx", x, "x");
  check_same_dtype(op, dx, "dx", x, "x");
  check_rank(op, w, "w", 1, "(C)");
  check_same_dtype(op, w, "w", x, "x");
  check_size(op, w, "w", 0, x.size(1), x, "x");
  if (has_dw) {
    check_same_shape(op, dw, "dw", w, "w");
    check_same_dtype(op, dw, "dw", w, "w");
  }
  check_dtype(op, rstd, "rstd", DType::kF32);
  if (rstd.shape() != Shape{x.size(0)})
    fail_op(op, "shape mismatch: " + describe_operand("rstd", rstd) + " vs " +
                    describe_operand("x", x));
  // dw is accumulated over rows while dx is written row by row: neither may
  // touch what the other, or an input, still has to read.
  for (const auto& [input, role] : {std::pair<const Tensor*, std::string_view>{&dy, "dy"},
                                    {&x, "x"},
                                    {&w, "w"},
                                    {&rstd, "rstd"}}) {
    check_disjoint(op, dx, "dx", *input, role);
    if (has_dw) check_disjoint(op, dw, "dw", *input, role);
  }
  if (has_dw) check_disjoint(op, dx, "dx", dw, "dw");
}

void check_rope(std::string_view op, BackendKind backend, const Tensor& x, const Tensor& positions,
                int64_t head_dim, float theta) {
  check_operand(op, backend, x, "x");
  check_operand(op, backend, positions, "positions");
  check_rank(op, x, "x", 2, "(T, n * head_dim)");
  check_floating(op, x, "x");
  check_rank(op, positions, "positions", 1, "(T)");
  check_dtype(op, positions, "positions", DType::kI32);
  check_size(op, positions, "positions", 0, x.size(0), x, "x");
  if (head_dim <= 0 || head_dim % 2 != 0 || x.size(1) % head_dim != 0)
    fail_op(op, "head_dim " + std::to_string(head_dim) +
                    " must be even, > 0 and divide the width of " + describe_operand("x", x));
  if (!(std::isfinite(theta) && theta > 0))
    fail_op(op, "theta " + value_string(theta) + " must be finite and > 0 (x " +
                    describe_operand(x) + ")");
  check_disjoint(op, x, "x", positions, "positions");
}

GemmDims check_gemm_bias(BackendKind backend, const Tensor& a, bool transpose_a, const Tensor& b,
                         bool transpose_b, const Tensor& c, const Tensor& bias) {
  constexpr std::string_view op = "gemm_bias";
  const GemmDims d = check_gemm(backend, a, transpose_a, b, transpose_b, c);
  check_operand(op, backend, bias, "bias");
  check_rank(op, bias, "bias", 1, "(N)");
  check_same_dtype(op, c, "c", bias, "bias");
  check_size(op, bias, "bias", 0, c.size(1), c, "c");
  check_disjoint(op, c, "c", bias, "bias");
  return d;
}

void check_bias_forward(BackendKind backend, const Tensor& x, const Tensor& bias) {
  constexpr std::string_view op = "bias_forward";
  check_operand(op, backend, x, "x");
  check_operand(op, backend, bias, "bias");
  check_rank(op, x, "x", 2, "(T, N)");
  check_floating(op, x, "x");
  check_rank(op, bias, "bias", 1, "(N)");
  check_same_dtype(op, x, "x", bias, "bias");
  check_size(op, bias, "bias", 0, x.size(1), x, "x");
  check_disjoint(op, x, "x", bias, "bias");
}

void check_bias_backward(BackendKind backend, const Tensor& dy, const Tensor& d_bias) {
  constexpr std::string_view op = "bias_backward";
  check_operand(op, backend, dy, "dy");
  check_operand(op, backend, d_bias, "d_bias");
  check_rank(op, dy, "dy", 2, "(T, N)");
  check_floating(op, dy, "dy");
  check_rank(op, d_bias, "d_bias", 1, "(N)");
  check_same_dtype(op, dy, "dy", d_bias, "d_bias");
  check_size(op, d_bias, "d_bias", 0, dy.size(1), dy, "dy");
  check_disjoint(op, d_bias, "d_bias", dy, "dy");
}

void check_swiglu_forward(BackendKind backend, const Tensor& gate, const Tensor& up,
                          const Tensor& out) {
  constexpr std::string_view op = "swiglu_forward";
  check_operand(op, backend, gate, "gate");
  check_operand(op, backend, up, "up");
  check_operand(op, backend, out, "out");
  check_rank(op, gate, "gate", 2, "(T, F)");
  check_floating(op, gate, "gate");
  check_same_shape(op, gate, "gate", up, "up");
  check_same_dtype(op, gate, "gate", up, "up");
  check_same_shape(op, gate, "gate", out, "out");
  check_same_dtype(op, gate, "gate", out, "out");
  check_identical_or_disjoint(op, out, "out", gate, "gate");
  check_identical_or_disjoint(op, out, "out", up, "up");
}

void check_swiglu_backward(BackendKind backend, const Tensor& d_out, const Tensor& gate,
                           const Tensor& up, const Tensor& d_gate, const Tensor& d_up) {
  constexpr std::string_view op = "swiglu_backward";
  check_operand(op, backend, d_out, "d_out");
  check_operand(op, backend, gate, "gate");
  check_operand(op, backend, up, "up");
  check_operand(op, backend, d_gate, "d_gate");
  check_operand(op, backend, d_up, "d_up");
  check_rank(op, gate, "gate", 2, "(T, F)");
  check_floating(op, gate, "gate");
  for (const auto& [t, role] : {std::pair<const Tensor*, std::string_view>{&d_out, "d_out"},
                                {&up, "up"},
                                {&d_gate, "d_gate"},
                                {&d_up, "d_up"}}) {
    check_same_shape(op, *t, role, gate, "gate");
    check_same_dtype(op, *t, role, gate, "gate");
  }
  check_disjoint(op, d_gate, "d_gate", d_up, "d_up");
  for (const auto& [input, role] : {std::pair<const Tensor*, std::string_view>{&d_out, "d_out"},
                                    {&gate, "gate"},
                                    {&up, "up"}}) {
    check_identical_or_disjoint(op, d_gate, "d_gate", *input, role);
    check_identical_or_disjoint(op, d_up, "d_up", *input, role);
  }
}

namespace {

using Operands = std::vector<std::pair<const Tensor*, std::string_view>>;

// What both AdamW ops check of param, master and grad; returns them as the
// operands that must be disjoint from the states.
Operands check_weights(std::string_view op, BackendKind backend, const Tensor& param,
                       const Tensor& master, const Tensor& grad) {
  check_operand(op, backend, param, "param");
  check_operand(op, backend, grad, "grad");
  check_rank(op, param, "param", 1, "(N)");
  check_floating(op, param, "param");
  check_same_shape(op, grad, "grad", param, "param");
  check_same_dtype(op, grad, "grad", param, "param");
  Operands operands = {{&param, "param"}, {&grad, "grad"}};
  if (is_half(param.dtype())) {
    // fp32 or bf16 (a bf16 param's), or none: the update is then rounded
    // into param itself (optimizer.master_dtype = "none").
    if (master.defined()) {
      check_operand(op, backend, master, "master");
      check_same_shape(op, master, "master", param, "param");
      check_floating(op, master, "master");
      if (master.dtype() != DType::kF32 && master.dtype() != param.dtype())
        fail_op(op, "master " + describe_operand(master) + " must be fp32 or param's dtype, " +
                        std::string(name_of(param.dtype())));
      operands.emplace_back(&master, "master");
    }
  } else if (master.defined()) {
    fail_op(op, describe_operand("param", param) + " is fp32 and is its own master, but master " +
                    describe_operand(master) + " was given");
  }
  return operands;
}

void check_disjoint_all(std::string_view op, const Operands& operands) {
  for (size_t i = 0; i < operands.size(); ++i)
    for (size_t j = i + 1; j < operands.size(); ++j)
      check_disjoint(op, *operands[i].first, operands[i].second, *operands[j].first,
                     operands[j].second);
}

void check_hyperparameters(std::string_view op, const Tensor& param, const AdamWParams& params) {
  auto hyper = [&](std::string_view name, double value, bool ok, std::string_view rule) {
    if (!ok)
      fail_op(op, std::string(name) + " " + value_string(value) + " must be " + std::string(rule) +
                      " (param " + describe_operand(param) + ")");
  };
  auto finite_at_least_zero = [](float x) { return std::isfinite(x) && x >= 0; };
  auto in_unit_interval = [](float x) { return x >= 0 && x < 1; };  // false for NaN
  hyper("lr", params.lr, finite_at_least_zero(params.lr), "finite and >= 0");
  hyper("beta1", params.beta1, in_unit_interval(params.beta1), "in [0, 1)");
  hyper("beta2", params.beta2, in_unit_interval(params.beta2), "in [0, 1)");
  hyper("eps", params.eps, finite_at_least_zero(params.eps), "finite and >= 0");
  hyper("weight_decay", params.weight_decay, finite_at_least_zero(params.weight_decay),
        "finite and >= 0");
  hyper("grad_scale", params.grad_scale, std::isfinite(params.grad_scale), "finite");
  if (params.step < 1)
    fail_op(op, "step " + std::to_string(params.step) + " must be >= 1 (param " +
                    describe_operand(param) + ")");
}

}  // namespace

void check_adamw_update(BackendKind backend, const Tensor& param, const Tensor& master,
                        const Tensor& grad, const Tensor& m, const Tensor& v,
                        const AdamWParams& params) {
  constexpr std::string_view op = "adamw_update";
  Operands operands = check_weights(op, backend, param, master, grad);
  check_operand(op, backend, m, "m");
  check_operand(op, backend, v, "v");
  check_same_shape(op, m, "m", param, "param");
  check_dtype(op, m, "m", DType::kF32);
  check_same_shape(op, v, "v", param, "param");
  check_dtype(op, v, "v", DType::kF32);
  operands.emplace_back(&m, "m");
  operands.emplace_back(&v, "v");
  check_disjoint_all(op, operands);
  check_hyperparameters(op, param, params);
}

void check_adamw8bit_update(BackendKind backend, const Tensor& param, const Tensor& master,
                            const Tensor& grad, const Tensor& m, const Tensor& v,
                            const Tensor& m_absmax, const Tensor& v_absmax,
                            const AdamWParams& params) {
  constexpr std::string_view op = "adamw8bit_update";
  Operands operands = check_weights(op, backend, param, master, grad);
  const int64_t blocks = (param.numel() + 255) / 256;
  for (const auto& [t, role] : {std::pair<const Tensor*, std::string_view>{&m, "m"}, {&v, "v"}}) {
    check_operand(op, backend, *t, role);
    check_same_shape(op, *t, role, param, "param");
    check_dtype(op, *t, role, DType::kU8);
    operands.emplace_back(t, role);
  }
  for (const auto& [t, role] : {std::pair<const Tensor*, std::string_view>{&m_absmax, "m_absmax"},
                                {&v_absmax, "v_absmax"}}) {
    check_operand(op, backend, *t, role);
    check_rank(op, *t, role, 1, "(ceil(N / 256))");
    if (t->numel() != blocks)
      fail_op(op, describe_operand(role, *t) + " must hold " + std::to_string(blocks) +
                      " blocks of 256 for param " + describe_operand(param));
    check_dtype(op, *t, role, DType::kF32);
    operands.emplace_back(t, role);
  }
  check_disjoint_all(op, operands);
  check_hyperparameters(op, param, params);
}

}  // namespace headroom
