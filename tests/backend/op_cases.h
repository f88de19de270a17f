// The cases of the op harness (op_harness.h), one case type per op, by family.
#pragma once

#include <vector>

#include "op_harness.h"

namespace headroom::backend_test {

// fill, fill_uniform, copy, cast, add, dropout, gemm, copy_from_host,
// copy_to_host, scale, sum_squares (op_cases_basic.cc).
void add_basic_cases(std::vector<OpCase>& cases);
// embedding, rmsnorm, rope, bias, swiglu, cross_entropy, adamw, adamw8bit
// (op_cases_model.cc).
void add_model_cases(std::vector<OpCase>& cases);
// attention_forward, attention_backward, dense_attention_mask, _forward,
// _backward (op_cases_attention.cc).
void add_attention_cases(std::vector<OpCase>& cases);

inline std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  add_basic_cases(cases);
  add_model_cases(cases);
  add_attention_cases(cases);
  return cases;
}

}  // namespace headroom::backend_test
