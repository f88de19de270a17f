// Harness cases of the model ops: embedding, rmsnorm, rope, bias, swiglu,
// cross_entropy (forward and backward each), adamw_update and
// adamw8bit_update. References
// are the contracts of backend/backend.h in float64, in plain loops; the
// backward cases carry a finite-difference instance (fp32, small shapes)
// whose loss runs the backend's own forward.
#include <algorithm>
#include <cmath>

#include "op_cases.h"

namespace headroom::backend_test {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kF16 = DType::kF16;
constexpr DType kI32 = DType::kI32;
using Values = std::map<std::string, std::vector<double>>;

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

size_t at(int64_t row, int64_t cols, int64_t col) {
  return static_cast<size_t>(row * cols + col);
}

std::string fd_prefix(bool fd) {
  return fd ? "fd_" : "";
}

// ---- embedding ----

struct EmbeddingShape {
  DType dtype;
  int64_t vocab, channels, tokens;
  bool fd = false;
  // Every third id -1: a token another rank's part of a vocabulary-parallel
  // table holds (a zero row, no gradient).
  bool others = false;
};

std::string embedding_name(const EmbeddingShape& p) {
  return fd_prefix(p.fd) + dtype_name(p.dtype) + "_V" + std::to_string(p.vocab) + "_C" +
         std::to_string(p.channels) + "_T" + std::to_string(p.tokens) +
         (p.others ? "_others_ids" : "");
}

// ids with repeats (tokens > vocab repeats some for sure).
Operand embedding_ids(const EmbeddingShape& p) {
  std::vector<double> ids = random_integers(p.tokens, 11, 0, p.vocab - 1);
  if (p.others)
    for (size_t t = 0; t < ids.size(); t += 3)
      ids[t] = -1;
  return given("ids", {p.tokens}, kI32, ids);
}

std::vector<double> embedding_reference(const std::vector<double>& table,
                                        const std::vector<double>& ids, int64_t channels) {
  std::vector<double> out(ids.size() * static_cast<size_t>(channels));
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t c = 0; c < channels; ++c)
      out[at(static_cast<int64_t>(t), channels, c)] =
          ids[t] < 0 ? 0.0 : table[at(static_cast<int64_t>(ids[t]), channels, c)];
  return out;
}

struct EmbeddingForwardCase {
  static constexpr Op kOp = Op::kEmbeddingForward;
  using Params = EmbeddingShape;
  static std::vector<Params> params() {
    return {{kF32, 1, 1, 1},
            {kF32, 50, 17, 9},
            {kF32, 7, 64, 130},
            {kBF16, 50, 17, 9},
            {kBF16, 7, 64, 130},
            {kF32, 5, 3, 0},
            {kF16, 50, 17, 9},
            {kF32, 50, 17, 9, false, true},
            {kBF16, 7, 64, 130, false, true}};
  }
  static std::string name(const Params& p) { return embedding_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("table", {p.vocab, p.channels}, p.dtype, 1, 1.0, Category::kParam));
    r.add(embedding_ids(p));
    r.add(written("out", {p.tokens, p.channels}, p.dtype));
    r.call = [](Backend& be, OpRun& run) {
      be.embedding_forward(run.t("table"), run.t("ids"), run.t("out"));
    };
    r.reference = [p](const OpRun& run) {
      return Values{{"out", embedding_reference(run.v("table"), run.v("ids"), p.channels)}};
    };
    return r;
  }
};

struct EmbeddingBackwardCase {
  static constexpr Op kOp = Op::kEmbeddingBackward;
  using Params = EmbeddingShape;
  static std::vector<Params> params() {
    return {{kF32, 1, 1, 1},
            {kF32, 50, 17, 9},
            {kF32, 7, 64, 130},
            {kBF16, 50, 17, 9},
            {kBF16, 7, 64, 130},
            {kF32, 5, 3, 0},
            {kF32, 6, 4, 9, true},
            {kF16, 7, 64, 130},
            {kF32, 7, 64, 130, false, true},
            {kF32, 6, 4, 9, true, true}};
  }
  static std::string name(const Params& p) { return embedding_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("d_out", {p.tokens, p.channels}, p.dtype, 2));
    r.add(embedding_ids(p));
    // Accumulated into; zero for finite differences (the gradient alone).
    Operand& accumulated =
        r.add(random_operand("d_table", {p.vocab, p.channels}, p.dtype, 3, 1.0, Category::kGrad));
    if (p.fd) std::fill(accumulated.values.begin(), accumulated.values.end(), 0.0);
    r.call = [](Backend& be, OpRun& run) {
      be.embedding_backward(run.t("d_out"), run.t("ids"), run.t("d_table"));
    };
    r.reference = [p](const OpRun& run) {
      std::vector<double> d_table = run.v("d_table");
      const std::vector<double>& ids = run.v("ids");
      for (size_t t = 0; t < ids.size(); ++t)
        for (int64_t c = 0; c < p.channels && ids[t] >= 0; ++c)
          d_table[at(static_cast<int64_t>(ids[t]), p.channels, c)] +=
              run.v("d_out")[at(static_cast<int64_t>(t), p.channels, c)];
      return Values{{"d_table", d_table}};
    };
    if (p.fd) {
      std::vector<double> ids = r.v("ids"), d_out = r.v("d_out");
      r.finite_difference = FiniteDifference{
          {random_in(kF32, p.vocab * p.channels, 4)},
          {"d_table"},
          [p, ids, d_out](Backend& be, const std::vector<std::vector<double>>& vars) {
            Tensor table =
                make_tensor(be, {p.vocab, p.channels}, kF32, Category::kParam, "table", vars[0]);
            Tensor id = make_tensor(be, {p.tokens}, kI32, Category::kActivation, "ids", ids);
            Tensor out = be.empty({p.tokens, p.channels}, kF32, Category::kActivation, "out");
            be.embedding_forward(table, id, out);
            return dot(fetch(be, out), d_out);
          }};
    }
    return r;
  }
};

// ---- rmsnorm ----

struct RmsnormShape {
  DType dtype;
  int64_t rows, channels;
  float eps = 1e-5f;
  bool frozen = false;  // backward: dw undefined
  bool fd = false;
};

std::string rmsnorm_name(const RmsnormShape& p) {
  return fd_prefix(p.fd) + dtype_name(p.dtype) + "_N" + std::to_string(p.rows) + "_C" +
         std::to_string(p.channels) + "_eps" + number_name(p.eps) + (p.frozen ? "_frozen" : "");
}

// 1 / sqrt(mean(x^2) + eps) per row.
std::vector<double> rstd_reference(const std::vector<double>& x, int64_t rows, int64_t channels,
                                   float eps) {
  std::vector<double> rstd(static_cast<size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) {
    double sum = 0;
    for (int64_t c = 0; c < channels; ++c)
      sum += x[at(n, channels, c)] * x[at(n, channels, c)];
    rstd[static_cast<size_t>(n)] = 1.0 / std::sqrt(sum / static_cast<double>(channels) + eps);
  }
  return rstd;
}

struct RmsnormForwardCase {
  static constexpr Op kOp = Op::kRmsnormForward;
  using Params = RmsnormShape;
  static std::vector<Params> params() {
    return {{kF32, 1, 1},          {kF32, 7, 65},           {kF32, 33, 256, 1e-6f},
            {kBF16, 7, 65},        {kBF16, 33, 256, 1e-6f}, {kF32, 0, 8},
            {kF16, 33, 256, 1e-6f}};
  }
  static std::string name(const Params& p) { return rmsnorm_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("x", {p.rows, p.channels}, p.dtype, 1));
    r.add(random_operand("w", {p.channels}, p.dtype, 2, 1.0, Category::kParam));
    r.add(written("y", {p.rows, p.channels}, p.dtype));
    r.add(written("rstd", {p.rows}, kF32));
    r.call = [eps = p.eps](Backend& be, OpRun& run) {
      be.rmsnorm_forward(run.t("x"), run.t("w"), eps, run.t("y"), run.t("rstd"));
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double>& x = run.v("x");
      std::vector<double> rstd = rstd_reference(x, p.rows, p.channels, p.eps);
      std::vector<double> y(x.size());
      for (int64_t n = 0; n < p.rows; ++n)
        for (int64_t c = 0; c < p.channels; ++c)
          y[at(n, p.channels, c)] =
              x[at(n, p.channels, c)] * rstd[static_cast<size_t>(n)] * run.v("w")[c];
      return Values{{"y", y}, {"rstd", rstd}};
    };
    return r;
  }
};

struct RmsnormBackwardCase {
  static constexpr Op kOp = Op::kRmsnormBackward;
  using Params = RmsnormShape;
  static std::vector<Params> params() {
    // One element with a large eps: at C = 1, dx = r g eps / (x^2 + eps)
    // cancels all but eps / x^2 of r g, and fp32 keeps ~6e-8 / 1e-5 of it at
    // the usual eps; the forward case keeps C = 1 with eps = 1e-5.
    return {{kF32, 1, 1, 0.5f},
            {kF32, 7, 65},
            {kF32, 33, 256, 1e-6f},
            {kF32, 7, 65, 1e-5f, true},
            {kBF16, 7, 65},
            {kBF16, 33, 256, 1e-6f, true},
            {kF16, 7, 65},
            {kF32, 0, 8},
            {kF32, 3, 8, 1e-5f, false, true}};
  }
  static std::string name(const Params& p) { return rmsnorm_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("dy", {p.rows, p.channels}, p.dtype, 3));
    r.add(random_operand("x", {p.rows, p.channels}, p.dtype, 1));
    r.add(random_operand("w", {p.channels}, p.dtype, 2, 1.0, Category::kParam));
    // rstd as forward saved it (fp32); the kernel and the reference both use it.
    r.add(given("rstd", {p.rows}, kF32, rstd_reference(r.v("x"), p.rows, p.channels, p.eps)));
    r.add(written("dx", {p.rows, p.channels}, p.dtype, Category::kGrad));
    if (p.frozen) {
      r.add(undefined("dw"));
    } else {
      Operand& dw = r.add(random_operand("dw", {p.channels}, p.dtype, 4, 1.0, Category::kGrad));
      if (p.fd) std::fill(dw.values.begin(), dw.values.end(), 0.0);
    }
    r.call = [](Backend& be, OpRun& run) {
      be.rmsnorm_backward(run.t("dy"), run.t("x"), run.t("w"), run.t("rstd"), run.t("dx"),
                          run.t("dw"));
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double>&dy = run.v("dy"), &x = run.v("x"), &w = run.v("w"),
            &rstd = run.v("rstd");
      std::vector<double> dx(x.size());
      std::vector<double> dw = p.frozen ? std::vector<double>(w.size(), 0.0) : run.v("dw");
      const double channels = static_cast<double>(p.channels);
      for (int64_t n = 0; n < p.rows; ++n) {
        const double rs = rstd[static_cast<size_t>(n)];
        double gx = 0;
        for (int64_t c = 0; c < p.channels; ++c)
          gx += dy[at(n, p.channels, c)] * w[c] * x[at(n, p.channels, c)];
        for (int64_t c = 0; c < p.channels; ++c) {
          dx[at(n, p.channels, c)] = rs * dy[at(n, p.channels, c)] * w[c] -
                                     x[at(n, p.channels, c)] * rs * rs * rs / channels * gx;
          dw[c] += dy[at(n, p.channels, c)] * x[at(n, p.channels, c)] * rs;
        }
      }
      Values out{{"dx", dx}};
      if (!p.frozen) out["dw"] = dw;
      return out;
    };
    if (p.fd) {
      std::vector<double> dy = r.v("dy");
      r.finite_difference = FiniteDifference{
          {r.v("x"), r.v("w")},
          {"dx", "dw"},
          [p, dy](Backend& be, const std::vector<std::vector<double>>& vars) {
            Tensor x =
                make_tensor(be, {p.rows, p.channels}, kF32, Category::kActivation, "x", vars[0]);
            Tensor w = make_tensor(be, {p.channels}, kF32, Category::kParam, "w", vars[1]);
            Tensor y = be.empty({p.rows, p.channels}, kF32, Category::kActivation, "y");
            Tensor rstd = be.empty({p.rows}, kF32, Category::kActivation, "rstd");
            be.rmsnorm_forward(x, w, p.eps, y, rstd);
            return dot(fetch(be, y), dy);
          }};
    }
    return r;
  }
};

// ---- rope ----

struct RopeShape {
  DType dtype;
  int64_t tokens, heads, head_dim;
  float theta = 10000.0f;
  bool fd = false;
};

std::string rope_name(const RopeShape& p) {
  return fd_prefix(p.fd) + dtype_name(p.dtype) + "_T" + std::to_string(p.tokens) + "_n" +
         std::to_string(p.heads) + "_D" + std::to_string(p.head_dim) + "_theta" +
         number_name(p.theta);
}

// Positions of packed documents: 0, 1, ... restarting every 7 tokens, then a
// run from 1000 (far positions, large angles).
Operand rope_positions(const RopeShape& p) {
  std::vector<double> positions(static_cast<size_t>(p.tokens));
  for (int64_t t = 0; t < p.tokens; ++t)
    positions[static_cast<size_t>(t)] = t < p.tokens / 2 ? t % 7 : 1000 + t;
  return given("positions", {p.tokens}, kI32, positions);
}

// The rotation of the contract; sign -1 is the transpose (backward).
std::vector<double> rope_reference(const RopeShape& p, std::vector<double> x,
                                   const std::vector<double>& positions, double sign) {
  const int64_t half = p.head_dim / 2, width = p.heads * p.head_dim;
  for (int64_t t = 0; t < p.tokens; ++t)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        // The angle as the contract defines it: Hugging Face's fp32 steps.
        float exponent = static_cast<float>(2 * i) / static_cast<float>(p.head_dim);
        float power = static_cast<float>(std::pow(static_cast<double>(p.theta), exponent));
        float inv_freq = 1.0f / power;
        float angle = static_cast<float>(positions[static_cast<size_t>(t)]) * inv_freq;
        double c = std::cos(static_cast<double>(angle)),
               s = sign * std::sin(static_cast<double>(angle));
        size_t ia = at(t, width, h * p.head_dim + i), ib = ia + static_cast<size_t>(half);
        double a = x[ia], b = x[ib];
        x[ia] = a * c - b * s;
        x[ib] = b * c + a * s;
      }
  return x;
}

template <Op kOpOf>
struct RopeCase {
  static constexpr Op kOp = kOpOf;
  static constexpr bool kBackward = kOpOf == Op::kRopeBackward;
  using Params = RopeShape;
  static std::vector<Params> params() {
    std::vector<Params> list = {
        {kF32, 1, 1, 2},           {kF32, 9, 3, 8}, {kF32, 130, 2, 64, 1e6f}, {kBF16, 9, 3, 8},
        {kBF16, 130, 2, 64, 1e6f}, {kF32, 0, 2, 4}, {kF16, 130, 2, 64, 1e6f}};
    if (kBackward) list.push_back({kF32, 5, 2, 4, 10000.0f, true});
    return list;
  }
  static std::string name(const Params& p) { return rope_name(p); }
  static OpRun build(const Params& p) {
    const char* role = kBackward ? "dx" : "x";
    OpRun r;
    r.add(random_operand(role, {p.tokens, p.heads * p.head_dim}, p.dtype, 1));
    r.add(rope_positions(p));
    r.call = [p, role](Backend& be, OpRun& run) {
      if (kBackward)
        be.rope_backward(run.t(role), run.t("positions"), p.head_dim, p.theta);
      else
        be.rope_forward(run.t(role), run.t("positions"), p.head_dim, p.theta);
    };
    r.reference = [p, role](const OpRun& run) {
      return Values{
          {role, rope_reference(p, run.v(role), run.v("positions"), kBackward ? -1.0 : 1.0)}};
    };
    if (p.fd) {
      // dx holds the loss weights on the way in and d loss / dx on the way out.
      std::vector<double> weights = r.v("dx"), positions = r.v("positions");
      r.finite_difference = FiniteDifference{
          {random_in(kF32, p.tokens * p.heads * p.head_dim, 5)},
          {"dx"},
          [p, weights, positions](Backend& be, const std::vector<std::vector<double>>& vars) {
            Tensor x = make_tensor(be, {p.tokens, p.heads * p.head_dim}, kF32,
                                   Category::kActivation, "x", vars[0]);
            Tensor pos =
                make_tensor(be, {p.tokens}, kI32, Category::kActivation, "positions", positions);
            be.rope_forward(x, pos, p.head_dim, p.theta);
            return dot(fetch(be, x), weights);
          }};
    }
    return r;
  }
};

// ---- bias ----

struct BiasShape {
  DType dtype;
  int64_t tokens, width;
  bool fd = false;
};

std::string bias_name(const BiasShape& p) {
  return fd_prefix(p.fd) + dtype_name(p.dtype) + "_T" + std::to_string(p.tokens) + "_N" +
         std::to_string(p.width);
}

std::vector<BiasShape> bias_shapes() {
  return {{kF32, 1, 1},  {kF32, 9, 65}, {kF32, 130, 96}, {kBF16, 33, 17},
          {kBF16, 1, 3}, {kF32, 0, 4},  {kF16, 33, 17}};
}

struct BiasForwardCase {
  static constexpr Op kOp = Op::kBiasForward;
  using Params = BiasShape;
  static std::vector<Params> params() { return bias_shapes(); }
  static std::string name(const Params& p) { return bias_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("x", {p.tokens, p.width}, p.dtype, 1));
    r.add(random_operand("bias", {p.width}, p.dtype, 2, 1.0, Category::kParam));
    r.call = [](Backend& be, OpRun& run) { be.bias_forward(run.t("x"), run.t("bias")); };
    r.reference = [p](const OpRun& run) {
      std::vector<double> x = run.v("x");
      for (int64_t t = 0; t < p.tokens; ++t)
        for (int64_t j = 0; j < p.width; ++j)
          x[at(t, p.width, j)] += run.v("bias")[j];
      return Values{{"x", x}};
    };
    return r;
  }
};

struct BiasBackwardCase {
  static constexpr Op kOp = Op::kBiasBackward;
  using Params = BiasShape;
  static std::vector<Params> params() {
    std::vector<Params> list = bias_shapes();
    list.push_back({kF32, 5, 3, true});
    return list;
  }
  static std::string name(const Params& p) { return bias_name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("dy", {p.tokens, p.width}, p.dtype, 1));
    Operand& accumulated =
        r.add(random_operand("d_bias", {p.width}, p.dtype, 2, 1.0, Category::kGrad));
    if (p.fd) std::fill(accumulated.values.begin(), accumulated.values.end(), 0.0);
    r.call = [](Backend& be, OpRun& run) { be.bias_backward(run.t("dy"), run.t("d_bias")); };
    r.reference = [p](const OpRun& run) {
      std::vector<double> d_bias = run.v("d_bias");
      for (int64_t t = 0; t < p.tokens; ++t)
        for (int64_t j = 0; j < p.width; ++j)
          d_bias[j] += run.v("dy")[at(t, p.width, j)];
      return Values{{"d_bias", d_bias}};
    };
    if (p.fd) {
      std::vector<double> dy = r.v("dy"), x = random_in(kF32, p.tokens * p.width, 6);
      r.finite_difference = FiniteDifference{
          {random_in(kF32, p.width, 7)},
          {"d_bias"},
          [p, dy, x](Backend& be, const std::vector<std::vector<double>>& vars) {
            Tensor y = make_tensor(be, {p.tokens, p.width}, kF32, Category::kActivation, "x", x);
            Tensor bias = make_tensor(be, {p.width}, kF32, Category::kParam, "bias", vars[0]);
            be.bias_forward(y, bias);
            return dot(fetch(be, y), dy);
          }};
    }
    return r;
  }
};

// ---- swiglu ----

double sigmoid(double g) {
  return 1.0 / (1.0 + std::exp(-g));
}

struct SwigluShape {
  DType dtype;
  int64_t tokens, width;
  // forward: 1 out is gate, 2 out is up. backward: 1 d_gate is gate and
  // d_up is up, 2 d_gate is d_out.
  int alias = 0;
  bool fd = false;
};

std::string swiglu_name(const SwigluShape& p, const char* const* aliases) {
  return fd_prefix(p.fd) + dtype_name(p.dtype) + "_T" + std::to_string(p.tokens) + "_F" +
         std::to_string(p.width) + aliases[p.alias];
}

// gate spans the sigmoid's range (x4), with one far-negative element where
// exp(-g) overflows: the contract says silu is -0 there, not NaN.
Operand swiglu_gate(const SwigluShape& p, uint64_t seed) {
  Operand gate = random_operand("gate", {p.tokens, p.width}, p.dtype, seed, 4.0);
  if (!gate.values.empty() && !p.fd) gate.values[gate.values.size() / 2] = -100.0;
  return gate;
}

struct SwigluForwardCase {
  static constexpr Op kOp = Op::kSwigluForward;
  using Params = SwigluShape;
  static constexpr const char* kAliases[] = {"", "_out_is_gate", "_out_is_up"};
  static std::vector<Params> params() {
    return {{kF32, 1, 1},       {kF32, 9, 65}, {kF32, 9, 65, 1}, {kBF16, 9, 65},
            {kBF16, 33, 17, 2}, {kF32, 0, 3},  {kF16, 33, 17, 2}};
  }
  static std::string name(const Params& p) { return swiglu_name(p, kAliases); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(swiglu_gate(p, 1));
    r.add(random_operand("up", {p.tokens, p.width}, p.dtype, 2));
    if (p.alias == 0) r.add(written("out", {p.tokens, p.width}, p.dtype));
    const char* out_role = p.alias == 0 ? "out" : p.alias == 1 ? "gate" : "up";
    r.call = [out_role](Backend& be, OpRun& run) {
      be.swiglu_forward(run.t("gate"), run.t("up"), run.t(out_role));
    };
    r.reference = [out_role](const OpRun& run) {
      const std::vector<double>&g = run.v("gate"), &u = run.v("up");
      std::vector<double> out(g.size());
      for (size_t i = 0; i < g.size(); ++i)
        out[i] = g[i] * sigmoid(g[i]) * u[i];
      return Values{{out_role, out}};
    };
    return r;
  }
};

struct SwigluBackwardCase {
  static constexpr Op kOp = Op::kSwigluBackward;
  using Params = SwigluShape;
  static constexpr const char* kAliases[] = {"", "_into_gate_and_up", "_d_gate_is_d_out"};
  static std::vector<Params> params() {
    return {{kF32, 1, 1},     {kF32, 9, 65},         {kF32, 9, 65, 1},
            {kF32, 9, 65, 2}, {kBF16, 33, 17},       {kBF16, 9, 65, 1},
            {kF32, 0, 3},     {kF32, 3, 5, 0, true}, {kF16, 9, 65, 1}};
  }
  static std::string name(const Params& p) { return swiglu_name(p, kAliases); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("d_out", {p.tokens, p.width}, p.dtype, 3));
    r.add(swiglu_gate(p, 1));
    r.add(random_operand("up", {p.tokens, p.width}, p.dtype, 2));
    if (p.alias != 1) r.add(written("d_up", {p.tokens, p.width}, p.dtype, Category::kGrad));
    if (p.alias == 0) r.add(written("d_gate", {p.tokens, p.width}, p.dtype, Category::kGrad));
    const char* d_gate = p.alias == 0 ? "d_gate" : p.alias == 1 ? "gate" : "d_out";
    const char* d_up = p.alias == 1 ? "up" : "d_up";
    r.call = [d_gate, d_up](Backend& be, OpRun& run) {
      be.swiglu_backward(run.t("d_out"), run.t("gate"), run.t("up"), run.t(d_gate), run.t(d_up));
    };
    r.reference = [d_gate, d_up](const OpRun& run) {
      const std::vector<double>&dy = run.v("d_out"), &g = run.v("gate"), &u = run.v("up");
      std::vector<double> dg(g.size()), du(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        double s = sigmoid(g[i]);
        du[i] = dy[i] * g[i] * s;
        dg[i] = dy[i] * u[i] * s * (1 + g[i] * (1 - s));
      }
      return Values{{d_gate, dg}, {d_up, du}};
    };
    if (p.fd) {
      std::vector<double> dy = r.v("d_out");
      r.finite_difference = FiniteDifference{
          {r.v("gate"), r.v("up")},
          {"d_gate", "d_up"},
          [p, dy](Backend& be, const std::vector<std::vector<double>>& vars) {
            Shape shape = {p.tokens, p.width};
            Tensor gate = make_tensor(be, shape, kF32, Category::kActivation, "gate", vars[0]);
            Tensor up = make_tensor(be, shape, kF32, Category::kActivation, "up", vars[1]);
            Tensor out = be.empty(shape, kF32, Category::kActivation, "out");
            be.swiglu_forward(gate, up, out);
            return dot(fetch(be, out), dy);
          }};
    }
    return r;
  }
};

// ---- cross_entropy ----

// kElsewhere: as kSome, and every third row from the first -2 (counted, the
// target in another rank's part of a vocabulary-parallel head).
enum class Ignore { kNone, kSome, kAll, kElsewhere };

struct CrossEntropyShape {
  DType dtype;
  int64_t rows, vocab;
  Ignore ignore = Ignore::kSome;
  float scale = 1.0f;  // backward
  bool fd = false;
};

std::string cross_entropy_name(const CrossEntropyShape& p, bool backward) {
  const char* ignore[] = {"", "_some_ignored", "_all_ignored", "_some_elsewhere"};
  std::string s = fd_prefix(p.fd) + dtype_name(p.dtype) + "_N" + std::to_string(p.rows) + "_V" +
                  std::to_string(p.vocab) + ignore[static_cast<int>(p.ignore)];
  return backward ? s + "_scale" + number_name(p.scale) : s;
}

// Targets in [0, V), with -1 (not counted) on every third row for kSome.
Operand cross_entropy_targets(const CrossEntropyShape& p) {
  std::vector<double> targets = random_integers(p.rows, 21, 0, p.vocab - 1);
  for (size_t i = 0; i < targets.size(); ++i)
    if (p.ignore == Ignore::kAll ||
        ((p.ignore == Ignore::kSome || p.ignore == Ignore::kElsewhere) && i % 3 == 1))
      targets[i] = -1;
    else if (p.ignore == Ignore::kElsewhere && i % 3 == 0)
      targets[i] = -2;
  return given("targets", {p.rows}, kI32, targets);
}

std::vector<double> lse_reference(const std::vector<double>& logits, int64_t rows, int64_t vocab) {
  std::vector<double> lse(static_cast<size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < vocab; ++j)
      max = std::max(max, logits[at(n, vocab, j)]);
    for (int64_t j = 0; j < vocab; ++j)
      sum += std::exp(logits[at(n, vocab, j)] - max);
    lse[static_cast<size_t>(n)] = max + std::log(sum);
  }
  return lse;
}

struct CrossEntropyForwardCase {
  static constexpr Op kOp = Op::kCrossEntropyForward;
  using Params = CrossEntropyShape;
  static std::vector<Params> params() {
    return {{kF32, 1, 1, Ignore::kNone},
            {kF32, 9, 65},
            {kF32, 33, 1031},
            {kBF16, 9, 65},
            {kBF16, 33, 1031},
            {kF16, 33, 1031},
            {kF32, 4, 7, Ignore::kAll},
            {kF32, 0, 5},
            {kF32, 9, 65, Ignore::kElsewhere},
            {kBF16, 33, 1031, Ignore::kElsewhere}};
  }
  static std::string name(const Params& p) { return cross_entropy_name(p, false); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("logits", {p.rows, p.vocab}, p.dtype, 1, 3.0, Category::kLogits));
    r.add(cross_entropy_targets(p));
    r.add(written("lse", {p.rows}, kF32));
    r.add(given("loss_sum", {1}, kF32, {0.5}));  // accumulated into
    r.call = [](Backend& be, OpRun& run) {
      be.cross_entropy_forward(run.t("logits"), run.t("targets"), run.t("lse"), run.t("loss_sum"));
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double>&logits = run.v("logits"), &targets = run.v("targets");
      std::vector<double> lse = lse_reference(logits, p.rows, p.vocab);
      double loss = run.v("loss_sum")[0];
      for (int64_t n = 0; n < p.rows; ++n)
        if (targets[static_cast<size_t>(n)] >= 0)
          loss += lse[static_cast<size_t>(n)] -
                  logits[at(n, p.vocab, static_cast<int64_t>(targets[static_cast<size_t>(n)]))];
      return Values{{"lse", lse}, {"loss_sum", {loss}}};
    };
    return r;
  }
};

struct CrossEntropyBackwardCase {
  static constexpr Op kOp = Op::kCrossEntropyBackward;
  using Params = CrossEntropyShape;
  static std::vector<Params> params() {
    return {{kF32, 1, 1, Ignore::kNone},
            {kF32, 9, 65},
            {kF32, 33, 1031, Ignore::kSome, 1.0f / 33},
            {kBF16, 9, 65},
            {kBF16, 33, 1031, Ignore::kNone, 0.25f},
            {kF16, 33, 1031, Ignore::kNone, 0.25f},
            {kF32, 4, 7, Ignore::kAll},
            {kF32, 0, 5},
            {kF32, 4, 6, Ignore::kSome, 0.5f, true},
            {kF32, 33, 1031, Ignore::kElsewhere, 1.0f / 33},
            {kBF16, 9, 65, Ignore::kElsewhere, 0.25f}};
  }
  static std::string name(const Params& p) { return cross_entropy_name(p, true); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("logits", {p.rows, p.vocab}, p.dtype, 1, 3.0, Category::kLogits));
    r.add(cross_entropy_targets(p));
    // lse as forward saved it (fp32).
    r.add(given("lse", {p.rows}, kF32, lse_reference(r.v("logits"), p.rows, p.vocab)));
    r.call = [scale = p.scale](Backend& be, OpRun& run) {
      be.cross_entropy_backward(run.t("logits"), run.t("targets"), run.t("lse"), scale);
    };
    r.reference = [p](const OpRun& run) {
      std::vector<double> d = run.v("logits");
      const std::vector<double>& targets = run.v("targets");
      for (int64_t n = 0; n < p.rows; ++n) {
        const double target = targets[static_cast<size_t>(n)];
        for (int64_t j = 0; j < p.vocab; ++j) {
          double& x = d[at(n, p.vocab, j)];
          // -1: not counted; -2: the softmax alone (the onehot is another
          // rank's).
          x = target == -1 ? 0.0
                           : p.scale * (std::exp(x - run.v("lse")[static_cast<size_t>(n)]) -
                                        (j == target ? 1.0 : 0.0));
        }
      }
      return Values{{"logits", d}};
    };
    if (p.fd) {
      std::vector<double> targets = r.v("targets");
      r.finite_difference = FiniteDifference{
          {r.v("logits")},
          {"logits"},
          [p, targets](Backend& be, const std::vector<std::vector<double>>& vars) {
            Tensor logits =
                make_tensor(be, {p.rows, p.vocab}, kF32, Category::kLogits, "logits", vars[0]);
            Tensor t = make_tensor(be, {p.rows}, kI32, Category::kActivation, "targets", targets);
            Tensor lse = be.empty({p.rows}, kF32, Category::kActivation, "lse");
            Tensor loss = make_tensor(be, {1}, kF32, Category::kActivation, "loss_sum", {0.0});
            be.cross_entropy_forward(logits, t, lse, loss);
            return p.scale * fetch(be, loss)[0];
          }};
    }
    return r;
  }
};

// ---- adamw_update, adamw8bit_update ----

// The weight an update is computed on: the master's values when there is one
// (fp32 or bf16), the parameter's otherwise; both written with the result.
enum class Master { kNone, kFp32, kBf16 };

std::string master_name(DType dtype, Master master) {
  if (dtype == kF32) return "";
  return master == Master::kFp32 ? "_master_fp32"
                                 : (master == Master::kBf16 ? "_master_bf16" : "_in_place");
}

AdamWParams adamw_params_of(int64_t step, float weight_decay, float grad_scale) {
  AdamWParams a;
  a.lr = 1e-2f;
  a.weight_decay = weight_decay;
  a.step = step;
  a.grad_scale = grad_scale;
  return a;
}

// param, master (or undefined) and grad, in that order.
void add_weights(OpRun& r, DType dtype, Master master, int64_t n) {
  Operand weights = random_operand("master", {n}, kF32, 1, 1.0, Category::kOptim);
  if (master == Master::kBf16)
    weights = given("master", {n}, kBF16, weights.values, Category::kOptim);
  r.add(given("param", {n}, dtype, weights.values, Category::kParam));
  if (is_half(dtype) && master != Master::kNone)
    r.add(weights);
  else
    r.add(undefined("master"));
  r.add(random_operand("grad", {n}, dtype, 2, 1.0, Category::kGrad));
}

// The updated weights as the outputs "param" and (with a master) "master".
Values weight_outputs(const OpRun& run, std::vector<double> w) {
  Values out;
  if (run.operand("master").defined) out["master"] = w;
  out["param"] = std::move(w);
  return out;
}

std::vector<double> weights_before(const OpRun& run) {
  return run.operand("master").defined ? run.v("master") : run.v("param");
}

struct AdamwCase {
  static constexpr Op kOp = Op::kAdamwUpdate;
  struct Params {
    DType dtype;  // param's; bf16 updates a master, or itself
    int64_t n;
    int64_t step;
    float weight_decay;
    float grad_scale;
    Master master = Master::kFp32;
  };
  static std::vector<Params> params() {
    return {{kF32, 1, 1, 0.0f, 1.0f},
            {kF32, 1031, 1, 0.1f, 1.0f},
            {kF32, 1031, 10, 0.1f, 0.5f},
            {kBF16, 1031, 1, 0.0f, 1.0f},
            {kBF16, 1031, 7, 0.1f, 0.25f},
            {kF16, 1031, 7, 0.1f, 0.25f},
            {kF16, 1031, 7, 0.1f, 0.25f, Master::kNone},
            {kBF16, 1, 3, 0.1f, 1.0f},
            {kBF16, 1031, 7, 0.1f, 0.25f, Master::kBf16},
            {kBF16, 1031, 7, 0.1f, 0.25f, Master::kNone},
            {kBF16, 1, 2, 0.0f, 1.0f, Master::kNone},
            {kF32, 0, 1, 0.1f, 1.0f}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + master_name(p.dtype, p.master) + "_N" + std::to_string(p.n) +
           "_step" + std::to_string(p.step) + "_wd" + number_name(p.weight_decay) + "_gs" +
           number_name(p.grad_scale);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    add_weights(r, p.dtype, p.master, p.n);
    r.add(random_operand("m", {p.n}, kF32, 3, 0.1, Category::kOptim));
    Operand& second_moment = r.add(random_operand("v", {p.n}, kF32, 4, 0.01, Category::kOptim));
    for (double& x : second_moment.values)
      x = std::fabs(x);  // a second moment
    r.call = [p](Backend& be, OpRun& run) {
      be.adamw_update(run.t("param"), run.t("master"), run.t("grad"), run.t("m"), run.t("v"),
                      adamw_params_of(p.step, p.weight_decay, p.grad_scale));
    };
    r.reference = [p](const OpRun& run) {
      const AdamWParams a = adamw_params_of(p.step, p.weight_decay, p.grad_scale);
      const double beta1 = a.beta1, beta2 = a.beta2, lr = a.lr, eps = a.eps;
      const double bc1 = 1 - std::pow(beta1, static_cast<double>(a.step));
      const double bc2 = 1 - std::pow(beta2, static_cast<double>(a.step));
      std::vector<double> w = weights_before(run);
      std::vector<double> m = run.v("m"), v = run.v("v");
      for (size_t i = 0; i < w.size(); ++i) {
        double g = run.v("grad")[i] * a.grad_scale;
        w[i] *= 1 - lr * a.weight_decay;
        m[i] = beta1 * m[i] + (1 - beta1) * g;
        v[i] = beta2 * v[i] + (1 - beta2) * g * g;
        w[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
      }
      Values out = weight_outputs(run, w);
      out["m"] = m;
      out["v"] = v;
      return out;
    };
    return r;
  }
};

}  // namespace

// bitsandbytes' dynamic map from its definition (create_dynamic_map with
// max_exponent_bits 7, total_bits 8), in float64 and with an exact
// linspace: independent of backend/common/dynamic_map.cc's fp32 one.
std::vector<double> reference_dynamic_map(bool is_signed) {
  std::vector<double> data;
  for (int i = 0; i < 7; ++i) {
    const int n = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    for (int j = 0; j + 1 < n; ++j) {
      const double lo = 0.1 + 0.9 * j / (n - 1), hi = 0.1 + 0.9 * (j + 1) / (n - 1);
      const double value = std::pow(10.0, i - 6) * (lo + hi) / 2;
      data.push_back(value);
      if (is_signed) data.push_back(-value);
    }
  }
  data.push_back(0);
  data.push_back(1);
  std::sort(data.begin(), data.end());
  return data;
}

// The nearest code (ties low), with bitsandbytes' sign rule for m.
double reference_quantize(const std::vector<double>& map, bool is_signed, double x) {
  size_t best = 0;
  for (size_t c = 1; c < map.size(); ++c)
    if (std::fabs(map[c] - x) < std::fabs(map[best] - x)) best = c;
  if (is_signed && x > 0 && map[best] < 0) ++best;
  if (is_signed && x < 0 && map[best] >= 0) --best;
  return static_cast<double>(best);
}

namespace {

struct Adamw8bitCase {
  static constexpr Op kOp = Op::kAdamw8bitUpdate;
  struct Params {
    DType dtype;
    int64_t n;  // blocks of 256, the last one partial unless n % 256 == 0
    int64_t step;
    float weight_decay;
    float grad_scale;
    Master master = Master::kFp32;
  };
  static std::vector<Params> params() {
    return {{kF32, 1, 1, 0.0f, 1.0f},
            {kF32, 1031, 3, 0.1f, 0.5f},
            {kF32, 512, 1, 0.0f, 1.0f},
            {kBF16, 1031, 5, 0.1f, 1.0f},
            {kF16, 1031, 5, 0.1f, 1.0f},
            {kBF16, 700, 2, 0.1f, 0.25f, Master::kBf16},
            {kBF16, 700, 2, 0.1f, 0.25f, Master::kNone},
            {kF32, 0, 1, 0.1f, 1.0f}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + master_name(p.dtype, p.master) + "_N" + std::to_string(p.n) +
           "_step" + std::to_string(p.step) + "_wd" + number_name(p.weight_decay) + "_gs" +
           number_name(p.grad_scale);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    const int64_t blocks = (p.n + 255) / 256;
    add_weights(r, p.dtype, p.master, p.n);
    r.add(given("m", {p.n}, DType::kU8, random_integers(p.n, 5, 0, 255), Category::kOptim));
    r.add(given("v", {p.n}, DType::kU8, random_integers(p.n, 6, 0, 255), Category::kOptim));
    Operand& m_absmax = r.add(random_operand("m_absmax", {blocks}, kF32, 7, 0.1, Category::kOptim));
    Operand& v_absmax =
        r.add(random_operand("v_absmax", {blocks}, kF32, 8, 0.01, Category::kOptim));
    for (double& x : m_absmax.values)
      x = std::fabs(x);
    for (double& x : v_absmax.values)
      x = std::fabs(x);
    r.call = [p](Backend& be, OpRun& run) {
      be.adamw8bit_update(run.t("param"), run.t("master"), run.t("grad"), run.t("m"), run.t("v"),
                          run.t("m_absmax"), run.t("v_absmax"),
                          adamw_params_of(p.step, p.weight_decay, p.grad_scale));
    };
    r.reference = [p, blocks](const OpRun& run) {
      const AdamWParams a = adamw_params_of(p.step, p.weight_decay, p.grad_scale);
      const double beta1 = a.beta1, beta2 = a.beta2, lr = a.lr, eps = a.eps;
      const double c1 = 1 - std::pow(beta1, static_cast<double>(a.step));
      const double c2 = std::sqrt(1 - std::pow(beta2, static_cast<double>(a.step)));
      const std::vector<double> map_s = reference_dynamic_map(true);
      const std::vector<double> map_u = reference_dynamic_map(false);
      std::vector<double> w = weights_before(run);
      std::vector<double> mc = run.v("m"), vc = run.v("v");
      std::vector<double> ma = run.v("m_absmax"), va = run.v("v_absmax");
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t lo = static_cast<size_t>(b * 256);
        const size_t hi = std::min(w.size(), lo + 256);
        std::vector<double> m(hi - lo), v(hi - lo);
        double m_max = 0, v_max = 0;
        for (size_t i = lo; i < hi; ++i) {
          const double g = run.v("grad")[i] * a.grad_scale;
          m[i - lo] = beta1 * map_s[static_cast<size_t>(mc[i])] * ma[static_cast<size_t>(b)] +
                      (1 - beta1) * g;
          v[i - lo] = beta2 * map_u[static_cast<size_t>(vc[i])] * va[static_cast<size_t>(b)] +
                      (1 - beta2) * g * g;
          m_max = std::max(m_max, std::fabs(m[i - lo]));
          v_max = std::max(v_max, v[i - lo]);
          w[i] -= lr * c2 / c1 * m[i - lo] / (std::sqrt(v[i - lo]) + c2 * eps);
          w[i] *= 1 - lr * a.weight_decay;  // after the update, as bitsandbytes' kernel
        }
        ma[static_cast<size_t>(b)] = m_max;
        va[static_cast<size_t>(b)] = v_max;
        for (size_t i = lo; i < hi; ++i) {
          mc[i] = reference_quantize(map_s, true, m[i - lo] / m_max);
          vc[i] = reference_quantize(map_u, false, v[i - lo] / v_max);
        }
      }
      Values out = weight_outputs(run, w);
      out["m"] = mc;
      out["v"] = vc;
      out["m_absmax"] = ma;
      out["v_absmax"] = va;
      return out;
    };
    return r;
  }
};

}  // namespace

void add_model_cases(std::vector<OpCase>& cases) {
  add_case<EmbeddingForwardCase>(cases);
  add_case<EmbeddingBackwardCase>(cases);
  add_case<RmsnormForwardCase>(cases);
  add_case<RmsnormBackwardCase>(cases);
  add_case<RopeCase<Op::kRopeForward>>(cases);
  add_case<RopeCase<Op::kRopeBackward>>(cases);
  add_case<BiasForwardCase>(cases);
  add_case<BiasBackwardCase>(cases);
  add_case<SwigluForwardCase>(cases);
  add_case<SwigluBackwardCase>(cases);
  add_case<CrossEntropyForwardCase>(cases);
  add_case<CrossEntropyBackwardCase>(cases);
  add_case<AdamwCase>(cases);
  add_case<Adamw8bitCase>(cases);
}

}  // namespace headroom::backend_test
