// Harness cases of the basic ops: fill, fill_uniform, copy, cast, add,
// dropout, gemm, gemm_bias, host transfers, scale, sum_squares. Each reference is the
// op's contract (backend/backend.h) in float64, in plain loops.
#include "op_cases.h"

namespace headroom::backend_test {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kF16 = DType::kF16;

// The counter-based stream of the contract (docs/backend.md, Determinism):
// splitmix64's mixer applied to mix(seed) + (i + 1) * golden ratio, whose
// top 24 bits over 2^24 are u in [0, 1). Written out rather than taken from
// backend/rng.h, so that a change to the stream (which would change every
// initialization and dropout mask a seed gives) fails here.
double reference_unit(uint64_t seed, uint64_t index) {
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t bits = mix(mix(seed) + (index + 1) * 0x9e3779b97f4a7c15ull);
  return static_cast<double>(bits >> 40) / 16777216.0;
}

// dropout keeps element i when the unit of stream seed ^ "dropout!" is >= p.
bool reference_keeps(uint64_t seed, uint64_t index, float p) {
  constexpr uint64_t kDropoutStream = 0x64726f706f757421ull;  // "dropout!"
  return reference_unit(seed ^ kDropoutStream, index) >= static_cast<double>(p);
}

// Values an operand of `dtype` can hold: random floats, or integers (uint8
// non-negative).
Operand random_of(std::string role, const Shape& shape, DType dtype, uint64_t seed) {
  if (is_floating(dtype)) return random_operand(std::move(role), shape, dtype, seed);
  int64_t lo = dtype == DType::kU8 ? 0 : -1000, hi = dtype == DType::kU8 ? 255 : 1000;
  return given(std::move(role), shape, dtype, random_integers(numel_of(shape), seed, lo, hi));
}

// ---- fill ----

struct FillCase {
  static constexpr Op kOp = Op::kFill;
  struct Params {
    DType dtype;
    Shape shape;
    float value;
  };
  static std::vector<Params> params() {
    std::vector<Params> list;
    for (DType dtype : {kF32, kBF16, kF16, DType::kI32, DType::kI64, DType::kU8})
      for (const Shape& shape : {Shape{1}, Shape{17, 65}, Shape{0, 5}})
        list.push_back({dtype, shape, dtype == DType::kU8 ? 200.7f : -3.7f});
    return list;
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + "_" + shape_name(p.shape) + "_v" + number_name(p.value);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(written("x", p.shape, p.dtype));
    r.call = [value = p.value](Backend& be, OpRun& run) { be.fill(run.t("x"), value); };
    r.reference = [p](const OpRun& run) {
      std::vector<double> x(run.v("x").size(), round_to(p.dtype, p.value));
      return std::map<std::string, std::vector<double>>{{"x", x}};
    };
    return r;
  }
};

// ---- fill_uniform ----

struct FillUniformCase {
  static constexpr Op kOp = Op::kFillUniform;
  struct Params {
    DType dtype;
    Shape shape;
    float lo, hi;
  };
  static std::vector<Params> params() {
    return {{kF32, {1}, 0.0f, 1.0f},       {kF32, {130, 65}, -0.02f, 0.02f},
            {kBF16, {3}, -1.0f, 1.0f},     {kBF16, {65, 33}, -0.5f, 2.0f},
            {kF16, {65, 33}, -0.5f, 2.0f}, {kF32, {0, 9}, 0.0f, 1.0f},
            {kF32, {7}, 1.5f, 1.5f}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + "_" + shape_name(p.shape) + "_lo" + number_name(p.lo) + "_hi" +
           number_name(p.hi);
  }
  static OpRun build(const Params& p) {
    constexpr uint64_t kSeed = 42;
    OpRun r;
    r.add(written("x", p.shape, p.dtype, Category::kParam));
    r.call = [p](Backend& be, OpRun& run) { be.fill_uniform(run.t("x"), kSeed, p.lo, p.hi); };
    r.reference = [p](const OpRun& run) {
      std::vector<double> x(run.v("x").size());
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = p.lo + (static_cast<double>(p.hi) - p.lo) * reference_unit(kSeed, i);
      return std::map<std::string, std::vector<double>>{{"x", x}};
    };
    return r;
  }
};

// ---- copy ----

struct CopyCase {
  static constexpr Op kOp = Op::kCopy;
  enum class Alias { kNone, kOntoItself, kIntoRows };
  struct Params {
    DType dtype;
    Shape shape;  // (rows, cols)
    Alias alias;
  };
  static std::vector<Params> params() {
    std::vector<Params> list;
    for (DType dtype : {kF32, kBF16, kF16, DType::kI32, DType::kI64, DType::kU8})
      list.push_back({dtype, {300, 31}, Alias::kNone});
    list.push_back({kF32, {1, 1}, Alias::kNone});
    list.push_back({kF32, {0, 8}, Alias::kNone});
    list.push_back({kBF16, {17, 65}, Alias::kOntoItself});
    list.push_back({kF16, {17, 65}, Alias::kOntoItself});
    list.push_back({kF32, {10, 33}, Alias::kIntoRows});
    return list;
  }
  static std::string name(const Params& p) {
    const char* alias[] = {"", "_onto_itself", "_into_rows"};
    return dtype_name(p.dtype) + "_" + shape_name(p.shape) + alias[static_cast<int>(p.alias)];
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_of("src", p.shape, p.dtype, 1));
    constexpr int64_t kOffset = 2;  // kIntoRows: dst rows [2, 2 + rows) of rows + 5
    if (p.alias == Alias::kNone) r.add(written("dst", p.shape, p.dtype));
    if (p.alias == Alias::kIntoRows)
      r.add(random_of("dst", {p.shape[0] + 5, p.shape[1]}, p.dtype, 2));
    r.call = [p](Backend& be, OpRun& run) {
      if (p.alias == Alias::kOntoItself) return be.copy(run.t("src"), run.t("src"));
      if (p.alias == Alias::kNone) return be.copy(run.t("src"), run.t("dst"));
      Tensor part = run.t("dst").rows(kOffset, kOffset + p.shape[0]);
      be.copy(run.t("src"), part);
    };
    r.reference = [p](const OpRun& run) {
      std::map<std::string, std::vector<double>> out;
      if (p.alias == Alias::kNone) out["dst"] = run.v("src");
      if (p.alias == Alias::kIntoRows) {
        std::vector<double> dst = run.v("dst");
        std::copy(run.v("src").begin(), run.v("src").end(), dst.begin() + kOffset * p.shape[1]);
        out["dst"] = dst;
      }
      return out;
    };
    return r;
  }
};

// ---- cast ----

struct CastCase {
  static constexpr Op kOp = Op::kCast;
  struct Params {
    DType from, to;
    Shape shape;
  };
  static std::vector<Params> params() {
    std::vector<Params> list;
    const std::pair<DType, DType> pairs[] = {
        {kF32, kBF16}, {kBF16, kF32},       {kF32, kF32},        {kBF16, kBF16},
        {kF32, kF16},  {kF16, kF32},        {kF16, kF16},        {kF16, kBF16},
        {kBF16, kF16}, {DType::kI32, kF32}, {DType::kI64, kF32}, {DType::kU8, kF32}};
    for (auto [from, to] : pairs)
      list.push_back({from, to, {65, 33}});
    list.push_back({kF32, kBF16, {1}});
    list.push_back({kF32, kBF16, {0, 4}});
    return list;
  }
  static std::string name(const Params& p) {
    return dtype_name(p.from) + "_to_" + dtype_name(p.to) + "_" + shape_name(p.shape);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    Operand& x = r.add(random_of("x", p.shape, p.from, 1));
    // Integers above 2^24 round in fp32: the reference keeps them exact.
    if (p.from == DType::kI32 || p.from == DType::kI64)
      for (size_t i = 0; i < x.values.size(); i += 7)
        x.values[i] = 16777217.0 + 1000.0 * static_cast<double>(i);
    Operand out = undefined("out");  // cast makes it
    out.shape = p.shape;
    out.dtype = p.to;
    r.add(out);
    r.call = [to = p.to](Backend& be, OpRun& run) {
      run.t("out") = be.cast(run.t("x"), to, Category::kCheckpoint, "out");
    };
    r.reference = [](const OpRun& run) {
      return std::map<std::string, std::vector<double>>{{"out", run.v("x")}};
    };
    return r;
  }
};

// ---- add ----

struct AddCase {
  static constexpr Op kOp = Op::kAdd;
  enum class Alias { kNone, kOutIsA, kOutIsB, kAllOne };
  struct Params {
    DType dtype;
    Shape shape;
    Alias alias;
  };
  static std::vector<Params> params() {
    std::vector<Params> list;
    for (DType dtype : {kF32, kBF16, kF16}) {
      list.push_back({dtype, {1}, Alias::kNone});
      list.push_back({dtype, {130, 65}, Alias::kNone});
      list.push_back({dtype, {130, 65}, Alias::kOutIsA});
      list.push_back({dtype, {7, 3}, Alias::kOutIsB});
      list.push_back({dtype, {9, 5}, Alias::kAllOne});
    }
    list.push_back({kF32, {0, 7}, Alias::kNone});
    return list;
  }
  static std::string name(const Params& p) {
    const char* alias[] = {"", "_out_is_a", "_out_is_b", "_a_b_out_one"};
    return dtype_name(p.dtype) + "_" + shape_name(p.shape) + alias[static_cast<int>(p.alias)];
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("a", p.shape, p.dtype, 1));
    if (p.alias != Alias::kAllOne) r.add(random_operand("b", p.shape, p.dtype, 2));
    if (p.alias == Alias::kNone) r.add(written("out", p.shape, p.dtype));
    r.call = [alias = p.alias](Backend& be, OpRun& run) {
      switch (alias) {
        case Alias::kNone:
          return be.add(run.t("a"), run.t("b"), run.t("out"));
        case Alias::kOutIsA:
          return be.add(run.t("a"), run.t("b"), run.t("a"));
        case Alias::kOutIsB:
          return be.add(run.t("a"), run.t("b"), run.t("b"));
        case Alias::kAllOne:
          return be.add(run.t("a"), run.t("a"), run.t("a"));
      }
    };
    r.reference = [alias = p.alias](const OpRun& run) {
      const std::vector<double>& a = run.v("a");
      const std::vector<double>& b = alias == Alias::kAllOne ? a : run.v("b");
      std::vector<double> sum(a.size());
      for (size_t i = 0; i < a.size(); ++i)
        sum[i] = a[i] + b[i];
      const char* out[] = {"out", "a", "b", "a"};
      return std::map<std::string, std::vector<double>>{{out[static_cast<int>(alias)], sum}};
    };
    return r;
  }
};

// ---- dropout ----

struct DropoutCase {
  static constexpr Op kOp = Op::kDropout;
  struct Params {
    DType dtype;
    Shape shape;
    float p;
    bool in_place;
  };
  static std::vector<Params> params() {
    return {{kF32, {1}, 0.5f, false},      {kF32, {33, 65}, 0.1f, false},
            {kF32, {1031}, 0.5f, true},    {kBF16, {33, 65}, 0.1f, false},
            {kF16, {33, 65}, 0.1f, false}, {kBF16, {17, 9}, 0.25f, true},
            {kF32, {65, 3}, 0.0f, false},  {kF32, {0, 4}, 0.5f, false}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + "_" + shape_name(p.shape) + "_p" + number_name(p.p) +
           (p.in_place ? "_in_place" : "");
  }
  static OpRun build(const Params& p) {
    constexpr uint64_t kSeed = 1234;
    OpRun r;
    r.add(random_operand("x", p.shape, p.dtype, 1));
    if (!p.in_place) r.add(written("out", p.shape, p.dtype));
    r.call = [p](Backend& be, OpRun& run) {
      be.dropout(run.t("x"), p.p, kSeed, run.t(p.in_place ? "x" : "out"));
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double>& x = run.v("x");
      // 1 / (1 - p) rounded to fp32 once, as the contract says.
      const double kept_scale = static_cast<float>(1.0f / (1.0f - p.p));
      std::vector<double> out(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        out[i] = reference_keeps(kSeed, i, p.p) ? x[i] * kept_scale : 0.0;
      return std::map<std::string, std::vector<double>>{{p.in_place ? "x" : "out", out}};
    };
    return r;
  }
};

// ---- gemm ----

struct GemmCase {
  static constexpr Op kOp = Op::kGemm;
  struct Params {
    DType ab, c;
    int64_t m, n, k;
    bool ta, tb;
    float alpha, beta;
    bool twice = false;  // the same call again: cuda's workspace is taken once per backend
  };
  static std::vector<Params> params() {
    return {
        {kF32, kF32, 1, 1, 1, false, false, 1.0f, 0.0f},
        {kF32, kF32, 17, 65, 130, false, false, 1.0f, 0.0f},
        {kF32, kF32, 17, 65, 130, true, false, 0.5f, 1.0f},
        {kF32, kF32, 17, 65, 130, false, true, 1.0f, 0.25f},
        {kF32, kF32, 17, 65, 130, true, true, -1.0f, 0.0f},
        {kBF16, kF32, 65, 3, 17, false, true, 1.0f, 0.0f},
        {kF16, kF32, 65, 3, 17, false, true, 1.0f, 0.0f},
        {kF16, kF16, 33, 7, 129, true, false, 1.0f, 1.0f},
        {kF16, kF16, 4, 6, 0, false, false, 1.0f, 0.5f},
        {kBF16, kBF16, 65, 3, 17, true, false, 1.0f, 1.0f},
        {kBF16, kBF16, 33, 7, 129, false, false, 1.0f, 0.0f},
        {kBF16, kBF16, 128, 64, 256, false, true, 1.0f, 0.0f},
        {kBF16, kBF16, 4, 6, 0, false, false, 1.0f, 0.5f},  // k = 0: C = beta C
        {kF32, kF32, 4, 6, 0, false, false, 1.0f, 0.0f},    // k = 0, beta = 0: exactly 0
        {kF32, kF32, 0, 6, 5, false, false, 1.0f, 0.0f},    // m = 0
        {kF32, kF32, 17, 65, 130, false, false, 1.0f, 0.0f, true},
        {kBF16, kF32, 9, 5, 3, true, true, 2.0f, 0.5f, true},
    };
  }
  static std::string name(const Params& p) {
    std::string s = dtype_name(p.ab) + "_to_" + dtype_name(p.c) + "_M" + std::to_string(p.m) +
                    "_N" + std::to_string(p.n) + "_K" + std::to_string(p.k) + "_" +
                    (p.ta ? "T" : "N") + (p.tb ? "T" : "N");
    if (p.alpha != 1.0f) s += "_alpha" + number_name(p.alpha);
    if (p.beta != 0.0f) s += "_beta" + number_name(p.beta);
    return s + (p.twice ? "_twice" : "");
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("a", p.ta ? Shape{p.k, p.m} : Shape{p.m, p.k}, p.ab, 1));
    r.add(random_operand("b", p.tb ? Shape{p.n, p.k} : Shape{p.k, p.n}, p.ab, 2));
    // beta = 0 must not read C: NaN there must not leak.
    r.add(p.beta == 0 ? written("c", {p.m, p.n}, p.c) : random_operand("c", {p.m, p.n}, p.c, 3));
    r.call = [p](Backend& be, OpRun& run) {
      for (int i = 0; i < (p.twice ? 2 : 1); ++i)
        be.gemm(run.t("a"), p.ta, run.t("b"), p.tb, run.t("c"), p.alpha, p.beta);
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double>& a = run.v("a");
      const std::vector<double>& b = run.v("b");
      std::vector<double> c(static_cast<size_t>(p.m * p.n));
      // twice: the second call reads the first one's C, as stored.
      std::vector<double> c0 = run.v("c");
      for (int rep = 0; rep < (p.twice ? 2 : 1); ++rep) {
        for (int64_t i = 0; i < p.m; ++i)
          for (int64_t j = 0; j < p.n; ++j) {
            double sum = 0;
            for (int64_t l = 0; l < p.k; ++l) {
              double x = a[static_cast<size_t>(p.ta ? l * p.m + i : i * p.k + l)];
              double y = b[static_cast<size_t>(p.tb ? j * p.k + l : l * p.n + j)];
              sum += x * y;
            }
            size_t at = static_cast<size_t>(i * p.n + j);
            c[at] = p.alpha * sum + (p.beta == 0 ? 0.0 : p.beta * c0[at]);
          }
        c0 = round_to(p.c, c);  // what the second call reads
      }
      return std::map<std::string, std::vector<double>>{{"c", c}};
    };
    return r;
  }
};

// ---- gemm_bias ----

struct GemmBiasCase {
  static constexpr Op kOp = Op::kGemmBias;
  struct Params {
    DType ab, c;
    int64_t m, n, k;
    bool ta, tb;
  };
  static std::vector<Params> params() {
    return {
        {kF32, kF32, 1, 1, 1, false, true},
        {kF32, kF32, 17, 65, 130, false, true},
        {kF32, kF32, 17, 65, 130, true, false},
        {kBF16, kBF16, 33, 7, 129, false, true},
        {kBF16, kBF16, 128, 64, 256, false, true},
        {kF16, kF16, 33, 7, 129, false, true},
        {kBF16, kF32, 65, 3, 17, false, true},
        {kBF16, kBF16, 4, 6, 0, false, true},  // k = 0: C = bias
        {kF32, kF32, 0, 6, 5, false, true},
    };
  }
  static std::string name(const Params& p) {
    return dtype_name(p.ab) + "_to_" + dtype_name(p.c) + "_M" + std::to_string(p.m) + "_N" +
           std::to_string(p.n) + "_K" + std::to_string(p.k) + "_" + (p.ta ? "T" : "N") +
           (p.tb ? "T" : "N");
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("a", p.ta ? Shape{p.k, p.m} : Shape{p.m, p.k}, p.ab, 1));
    r.add(random_operand("b", p.tb ? Shape{p.n, p.k} : Shape{p.k, p.n}, p.ab, 2));
    r.add(random_operand("bias", {p.n}, p.c, 3, 1.0, Category::kParam));
    r.add(written("c", {p.m, p.n}, p.c));  // not read: NaN there must not leak
    // The cpu rounds the product to c's dtype and then the sum (gemm, then
    // bias_forward); cuda's epilogue rounds once.
    r.roundings = 2;
    r.call = [p](Backend& be, OpRun& run) {
      be.gemm_bias(run.t("a"), p.ta, run.t("b"), p.tb, run.t("c"), run.t("bias"));
    };
    r.reference = [p](const OpRun& run) {
      const std::vector<double>& a = run.v("a");
      const std::vector<double>& b = run.v("b");
      const std::vector<double>& bias = run.v("bias");
      std::vector<double> c(static_cast<size_t>(p.m * p.n));
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < p.k; ++l)
            sum += a[static_cast<size_t>(p.ta ? l * p.m + i : i * p.k + l)] *
                   b[static_cast<size_t>(p.tb ? j * p.k + l : l * p.n + j)];
          c[static_cast<size_t>(i * p.n + j)] = sum + bias[static_cast<size_t>(j)];
        }
      return std::map<std::string, std::vector<double>>{{"c", c}};
    };
    return r;
  }
};

// ---- copy_from_host, copy_to_host ----

struct CopyFromHostCase {
  static constexpr Op kOp = Op::kCopyFromHost;
  struct Params {
    DType dtype;
    Shape shape;
  };
  static std::vector<Params> params() {
    return {{kF32, {1}},          {kF32, {257}},        {kBF16, {17, 65}}, {kF16, {17, 65}},
            {DType::kI32, {129}}, {DType::kU8, {1031}}, {kF32, {0}}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + "_" + shape_name(p.shape);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(written("dst", p.shape, p.dtype));
    std::vector<double> host = random_of("host", p.shape, p.dtype, 5).values;
    r.call = [host, dtype = p.dtype](Backend& be, OpRun& run) {
      std::vector<uint8_t> bytes = encode(dtype, host);
      be.copy_from_host(bytes.empty() ? nullptr : bytes.data(), run.t("dst"));
    };
    r.reference = [host](const OpRun&) {
      return std::map<std::string, std::vector<double>>{{"dst", host}};
    };
    return r;
  }
};

struct CopyToHostCase {
  static constexpr Op kOp = Op::kCopyToHost;
  using Params = CopyFromHostCase::Params;
  static std::vector<Params> params() { return CopyFromHostCase::params(); }
  static std::string name(const Params& p) { return CopyFromHostCase::name(p); }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_of("src", p.shape, p.dtype, 6));
    r.host_dtype = p.dtype;
    r.call = [](Backend& be, OpRun& run) {
      run.host_out.assign(run.t("src").nbytes(), 0xab);
      be.copy_to_host(run.t("src"), run.host_out.empty() ? nullptr : run.host_out.data());
    };
    r.reference = [](const OpRun& run) {
      return std::map<std::string, std::vector<double>>{{"host", run.v("src")}};
    };
    return r;
  }
};

// ---- scale, sum_squares ----

struct ScaleCase {
  static constexpr Op kOp = Op::kScale;
  struct Params {
    DType dtype;
    Shape shape;
    float alpha;
  };
  static std::vector<Params> params() {
    return {{kF32, {1}, 0.5f},        {kF32, {1031}, -3.0f}, {kF32, {65, 33}, 0.0f},
            {kBF16, {65, 33}, 0.37f}, {kBF16, {3}, -1.0f},   {kF32, {0}, 2.0f},
            {kF16, {65, 33}, 0.37f}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + "_" + shape_name(p.shape) + "_alpha" + number_name(p.alpha);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("x", p.shape, p.dtype, 1, 1.0, Category::kGrad));
    r.call = [alpha = p.alpha](Backend& be, OpRun& run) { be.scale(run.t("x"), alpha); };
    r.reference = [alpha = p.alpha](const OpRun& run) {
      std::vector<double> x = run.v("x");
      for (double& value : x)
        value *= alpha;
      return std::map<std::string, std::vector<double>>{{"x", x}};
    };
    return r;
  }
};

struct SumSquaresCase {
  static constexpr Op kOp = Op::kSumSquares;
  struct Params {
    DType dtype;
    Shape shape;
  };
  static std::vector<Params> params() {
    return {{kF32, {1}},  {kF32, {4099}}, {kF32, {65, 33}}, {kBF16, {4099}},
            {kBF16, {7}}, {kF32, {0}},    {kF16, {4099}}};
  }
  static std::string name(const Params& p) {
    return dtype_name(p.dtype) + "_" + shape_name(p.shape);
  }
  static OpRun build(const Params& p) {
    OpRun r;
    r.add(random_operand("x", p.shape, p.dtype, 1, 1.0, Category::kGrad));
    r.add(given("out", {1}, kF32, {0.75}));  // accumulated into
    r.call = [](Backend& be, OpRun& run) { be.sum_squares(run.t("x"), run.t("out")); };
    r.reference = [](const OpRun& run) {
      double sum = run.v("out")[0];
      for (double x : run.v("x"))
        sum += x * x;
      return std::map<std::string, std::vector<double>>{{"out", {sum}}};
    };
    return r;
  }
};

}  // namespace

void add_basic_cases(std::vector<OpCase>& cases) {
  add_case<FillCase>(cases);
  add_case<FillUniformCase>(cases);
  add_case<CopyCase>(cases);
  add_case<CastCase>(cases);
  add_case<AddCase>(cases);
  add_case<DropoutCase>(cases);
  add_case<GemmCase>(cases);
  add_case<GemmBiasCase>(cases);
  add_case<CopyFromHostCase>(cases);
  add_case<CopyToHostCase>(cases);
  add_case<ScaleCase>(cases);
  add_case<SumSquaresCase>(cases);
}

}  // namespace headroom::backend_test
