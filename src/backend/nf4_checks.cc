#include "backend/nf4_checks.h"

#include <string>
#include <utility>
#include <vector>

#include "backend/common/nf4.h"
#include "backend/op_checks.h"

namespace headroom {

namespace {

void check_length(std::string_view op, const Tensor& t, std::string_view role, int64_t expected,
                  DType dtype, const Nf4Weight& q) {
  check_dtype(op, t, role, dtype);
  if (t.shape() != Shape{expected})
    fail_op(op, describe_operand(role, t) + " must be [" + std::to_string(expected) +
                    "] for a weight of shape " + shape_to_string(q.shape));
}

}  // namespace

void check_nf4_weight(std::string_view op, BackendKind backend, const Nf4Weight& q) {
  if (q.shape.size() != 2) fail_op(op, "an NF4 weight is 2-D, got " + shape_to_string(q.shape));
  const bool dq = q.absmax2.defined();
  const Nf4Sizes sizes = nf4_sizes(q.numel(), dq);
  std::vector<std::pair<const Tensor*, std::string_view>> parts = {{&q.codes, "codes"},
                                                                   {&q.absmax, "absmax"}};
  if (dq)
    parts.insert(parts.end(), {{&q.absmax2, "absmax2"}, {&q.offset, "offset"}});
  else if (q.offset.defined())
    fail_op(op, describe_operand("offset", q.offset) + " without absmax2");
  for (const auto& [t, role] : parts)
    check_operand(op, backend, *t, role);
  check_length(op, q.codes, "codes", sizes.code_bytes, DType::kU8, q);
  check_length(op, q.absmax, "absmax", sizes.blocks, dq ? DType::kU8 : DType::kF32, q);
  if (dq) {
    check_length(op, q.absmax2, "absmax2", sizes.blocks2, DType::kF32, q);
    check_length(op, q.offset, "offset", 1, DType::kF32, q);
  }
  for (size_t i = 0; i < parts.size(); ++i)
    for (size_t j = i + 1; j < parts.size(); ++j)
      check_disjoint(op, *parts[i].first, parts[i].second, *parts[j].first, parts[j].second);
}

void check_nf4_quantize(BackendKind backend, const Tensor& w, const Nf4Weight& q) {
  constexpr std::string_view op = "nf4_quantize";
  check_nf4_weight(op, backend, q);
  check_operand(op, backend, w, "w");
  check_floating(op, w, "w");
  if (w.shape() != q.shape)
    fail_op(op, describe_operand("w", w) + " must have the NF4 weight's shape " +
                    shape_to_string(q.shape));
  for (const auto& [t, role] :
       {std::pair<const Tensor*, std::string_view>{&q.codes, "codes"}, {&q.absmax, "absmax"}})
    check_disjoint(op, w, "w", *t, role);
}

void check_nf4_dequantize(BackendKind backend, const Nf4Weight& q, DType dtype) {
  constexpr std::string_view op = "nf4_dequantize";
  check_nf4_weight(op, backend, q);
  if (!is_floating(dtype))
    fail_op(op, "the output dtype must be fp32 or bf16, got " + std::string(name_of(dtype)));
}

}  // namespace headroom
