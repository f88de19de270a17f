// Harness cases of the NF4 ops (QLoRA's frozen base): nf4_quantize and
// nf4_dequantize, with and without double quantization, blocks whole and
// partial, an odd element count. References are the contracts of
// backend/backend.h in float64 with the NF4 values from their definition
// (ops/nf4_reference.h) and the dynamic map from its (op_cases_model.cc).
#include <algorithm>
#include <cmath>

#include "op_cases.h"
#include "ops/nf4_reference.h"

namespace headroom::backend_test {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kF16 = DType::kF16;
constexpr DType kU8 = DType::kU8;
using Values = std::map<std::string, std::vector<double>>;

struct Nf4Params {
  DType dtype;  // the dense side: quantize's w, dequantize's output
  int64_t rows, cols;
  bool double_quant;
};

std::vector<Nf4Params> nf4_params() {
  return {{kF32, 4, 64, false}, {kBF16, 33, 70, false}, {kF32, 7, 9, false}, {kBF16, 300, 64, true},
          {kF32, 5, 13, true},  {kF32, 0, 64, false},   {kF16, 33, 70, true}};
}

std::string nf4_name(const Nf4Params& p) {
  return dtype_name(p.dtype) + "_" + std::to_string(p.rows) + "x" + std::to_string(p.cols) +
         (p.double_quant ? "_dq" : "");
}

int64_t blocks_of(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

// The storage operands of a weight of p's shape, with `values` per role
// (quantize: sentinels, the op writes them; dequantize: given codes).
void add_storage(OpRun& r, const Nf4Params& p, bool written_by_op) {
  const int64_t n = p.rows * p.cols, blocks = blocks_of(n, 64);
  auto part = [&](std::string role, int64_t length, DType dtype, uint64_t seed, double lo,
                  double hi) {
    if (written_by_op) {
      r.add(written(std::move(role), {length}, dtype, Category::kParam));
    } else if (dtype == kU8) {
      r.add(given(std::move(role), {length}, kU8,
                  random_integers(length, seed, static_cast<int64_t>(lo), static_cast<int64_t>(hi)),
                  Category::kParam));
    } else {
      Operand& o =
          r.add(random_operand(std::move(role), {length}, kF32, seed, 1, Category::kParam));
      for (double& x : o.values)
        x = static_cast<float>(lo + (hi - lo) * std::fabs(x));
    }
  };
  part("codes", (n + 1) / 2, kU8, 11, 0, 255);
  if (p.double_quant) {
    part("absmax", blocks, kU8, 12, 0, 255);
    part("absmax2", blocks_of(blocks, 256), kF32, 13, 0.01, 0.02);
    part("offset", 1, kF32, 14, 0.5, 1.0);
  } else {
    part("absmax", blocks, kF32, 12, 0.25, 2.0);
  }
}

Nf4Weight weight_of(OpRun& run, const Nf4Params& p) {
  Nf4Weight q;
  q.shape = {p.rows, p.cols};
  q.codes = run.t("codes");
  q.absmax = run.t("absmax");
  if (p.double_quant) {
    q.absmax2 = run.t("absmax2");
    q.offset = run.t("offset");
  }
  return q;
}

// Code i of the packed bytes (high nibble first).
int code_at(const std::vector<double>& bytes, size_t i) {
  const int byte = static_cast<int>(bytes[i / 2]);
  return i % 2 == 0 ? byte >> 4 : byte & 0x0f;
}

struct Nf4QuantizeCase {
  static constexpr Op kOp = Op::kNf4Quantize;
  using Params = Nf4Params;
  static std::vector<Params> params() { return nf4_params(); }
  static std::string name(const Params& p) { return nf4_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    Operand& weight =
        r.add(random_operand("w", {p.rows, p.cols}, p.dtype, 21, 1, Category::kWorkspace));
    // A block of zeros (its absmax is 0) when the weight has a whole one.
    if (weight.values.size() >= 128)
      std::fill(weight.values.begin() + 64, weight.values.begin() + 128, 0.0);
    add_storage(r, p, true);
    r.call = [p](Backend& be, OpRun& run) {
      Nf4Weight q = weight_of(run, p);
      be.nf4_quantize(run.t("w"), q);
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double> values = reference_nf4_values();
      const std::vector<double>& w = run.v("w");
      const size_t n = w.size(), blocks = static_cast<size_t>(blocks_of(p.rows * p.cols, 64));
      std::vector<double> absmax(blocks, 0.0), codes((n + 1) / 2, 0.0);
      for (size_t i = 0; i < n; ++i)
        absmax[i / 64] = std::max(absmax[i / 64], std::fabs(w[i]));
      for (size_t i = 0; i < n + n % 2; ++i) {
        const double a = absmax[i / 64];
        // A zero block: bitsandbytes' 0 * (1 / 0) is NaN, code 0.
        const int code = a == 0 ? 0 : reference_nf4_code(values, i < n ? w[i] / a : 0.0);
        codes[i / 2] += i % 2 == 0 ? 16 * code : code;
      }
      Values out{{"codes", codes}};
      if (!p.double_quant) {
        out["absmax"] = absmax;
        return out;
      }
      double sum = 0;
      for (double a : absmax)
        sum += a;
      const double offset = sum / static_cast<double>(blocks);
      const std::vector<double> map = reference_dynamic_map(true);
      std::vector<double> absmax2(
          static_cast<size_t>(blocks_of(static_cast<int64_t>(blocks), 256)));
      std::vector<double> qabsmax(blocks);
      for (size_t b = 0; b < blocks; ++b)
        absmax2[b / 256] = std::max(absmax2[b / 256], std::fabs(absmax[b] - offset));
      for (size_t b = 0; b < blocks; ++b)
        qabsmax[b] = reference_quantize(map, false, (absmax[b] - offset) / absmax2[b / 256]);
      out["absmax"] = qabsmax;
      out["absmax2"] = absmax2;
      out["offset"] = {offset};
      return out;
    };
    return r;
  }
};

struct Nf4DequantizeCase {
  static constexpr Op kOp = Op::kNf4Dequantize;
  using Params = Nf4Params;
  static std::vector<Params> params() { return nf4_params(); }
  static std::string name(const Params& p) { return nf4_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    add_storage(r, p, false);
    Operand result = undefined("out");  // dequantize makes it
    result.shape = {p.rows, p.cols};
    result.dtype = p.dtype;
    r.add(result);
    r.call = [p](Backend& be, OpRun& run) {
      const Nf4Weight q = weight_of(run, p);
      run.t("out") = be.nf4_dequantize(q, p.dtype, Category::kWorkspace, "out");
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double> values = reference_nf4_values();
      const size_t n = static_cast<size_t>(p.rows * p.cols);
      std::vector<double> absmax = run.v("absmax");
      if (p.double_quant) {
        const std::vector<double> map = reference_dynamic_map(true);
        for (size_t b = 0; b < absmax.size(); ++b)
          absmax[b] =
              map[static_cast<size_t>(absmax[b])] * run.v("absmax2")[b / 256] + run.v("offset")[0];
      }
      std::vector<double> out(n);
      for (size_t i = 0; i < n; ++i)
        out[i] = values[static_cast<size_t>(code_at(run.v("codes"), i))] * absmax[i / 64];
      return Values{{"out", out}};
    };
    return r;
  }
};

}  // namespace

void add_nf4_cases(std::vector<OpCase>& cases) {
  add_case<Nf4QuantizeCase>(cases);
  add_case<Nf4DequantizeCase>(cases);
}

}  // namespace headroom::backend_test
