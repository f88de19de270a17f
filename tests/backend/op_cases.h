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
// nf4_quantize, nf4_dequantize (op_cases_nf4.cc).
void add_nf4_cases(std::vector<OpCase>& cases);

// bitsandbytes' dynamic map from its definition (create_dynamic_map with
// max_exponent_bits 7, total_bits 8), in float64 (op_cases_model.cc).
std::vector<double> reference_dynamic_map(bool is_signed);
// The code of the map value nearest x (ties low); with is_signed,
// bitsandbytes' 8-bit optimizer's sign rule.
double reference_quantize(const std::vector<double>& map, bool is_signed, double x);

inline std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  add_basic_cases(cases);
  add_model_cases(cases);
  add_attention_cases(cases);
  add_nf4_cases(cases);
  return cases;
}

}  // namespace headroom::backend_test
