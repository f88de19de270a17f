// Harness cases of attention_forward and attention_backward (and of the
// dense_additive ops, on the same shapes and references, further down): packed
// documents (1-token ones, an empty one), T not a multiple of the block,
// GQA and MQA, every mask kind (document, causal across documents, sliding
// windows, dflash blocks of awkward lengths), T = 0. The float64 reference
// materializes each head's masked T x T probabilities from the mask's
// definition (document, position within it, block of the position), never
// from backend/common/attention_mask.h.
#include <cmath>
#include <limits>
#include <string>

#include "op_cases.h"

namespace headroom::backend_test {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kF16 = DType::kF16;
using Values = std::map<std::string, std::vector<double>>;

struct AttentionShape {
  DType dtype;
  std::vector<int32_t> docs;  // document lengths, packed in order; T is their sum
  int64_t heads, kv_heads, head_dim;
  int64_t block = 64;
  int64_t window = 0;
  bool fd = false;
  AttentionMaskKind mask = AttentionMaskKind::kDocument;  // sliding_window when window > 0
  int64_t mask_block = 0;                                 // dflash_block's

  AttentionMaskKind kind() const { return window > 0 ? AttentionMaskKind::kSlidingWindow : mask; }

  int64_t tokens() const {
    int64_t t = 0;
    for (int32_t length : docs)
      t += length;
    return t;
  }
  std::vector<int32_t> cu_seqlens() const {
    std::vector<int32_t> cu = {0};
    for (int32_t length : docs)
      cu.push_back(cu.back() + length);
    return cu;
  }
  AttentionParams params() const {
    AttentionParams p;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.block_size = block;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    p.mask = kind();
    p.window = window;
    p.mask_block = mask_block;
    return p;
  }
  std::string name() const {
    bool empty_doc = false;
    for (int32_t length : docs)
      empty_doc = empty_doc || length == 0;
    std::string s = (fd ? "fd_" : "") + dtype_name(dtype) + "_T" + std::to_string(tokens()) + "_H" +
                    std::to_string(heads) + "_KV" + std::to_string(kv_heads) + "_D" +
                    std::to_string(head_dim) + "_docs" + std::to_string(docs.size());
    if (empty_doc) s += "_with_empty";
    if (block != 64) s += "_B" + std::to_string(block);
    if (window != 0) s += "_window" + std::to_string(window);
    if (mask == AttentionMaskKind::kCausal) s += "_causal";
    if (mask == AttentionMaskKind::kDflashBlock) s += "_dflash" + std::to_string(mask_block);
    return s;
  }
};

std::vector<AttentionShape> attention_shapes() {
  return {
      {kF32, {1}, 1, 1, 8},           // one token
      {kF32, {50, 1, 79}, 4, 2, 16},  // T = 130: 3 tiles, the last partial
      {kBF16, {50, 1, 79}, 4, 2, 16},
      {kF16, {50, 1, 79}, 4, 2, 16},
      {kF32, {20, 0, 45}, 2, 2, 8, 16},            // an empty document
      {kF32, {30, 7}, 6, 1, 12, 32, 5},            // MQA, sliding window
      {kBF16, {70}, 4, 1, 64},                     // head_dim 64, T not a multiple of 64
      {kBF16, {1, 64, 63, 1}, 2, 1, 32, 128, 40},  // largest block, window
      // The cuda tensor-core kernel's head_dims (64, 128) in both 16-bit
      // dtypes: causal with GQA 2; documents shorter than its 64-token
      // tiles beside one over three; a window that fits no tile; dflash.
      {kBF16, {50, 1, 79}, 4, 2, 128, 64, 0, false, AttentionMaskKind::kCausal},
      {kF16, {70, 3, 200}, 4, 4, 128},
      {kF16, {150}, 2, 1, 64, 32, 40},
      {kBF16, {100, 30}, 2, 1, 64, 16, 0, false, AttentionMaskKind::kDflashBlock, 40},
      {kF32, {0}, 2, 2, 4, 16},  // T = 0: one empty document
      // causal across documents; dflash blocks that straddle tiles and
      // documents, of one token, of a whole document.
      {kF32, {50, 1, 79}, 4, 2, 16, 64, 0, false, AttentionMaskKind::kCausal},
      {kF32, {50, 1, 79}, 4, 2, 16, 32, 0, false, AttentionMaskKind::kDflashBlock, 7},
      {kBF16, {100, 30}, 2, 1, 8, 16, 0, false, AttentionMaskKind::kDflashBlock, 40},
      {kF32, {13, 0, 9}, 2, 2, 8, 4, 0, false, AttentionMaskKind::kDflashBlock, 1},
      {kF32, {13, 9}, 2, 2, 8, 4, 0, false, AttentionMaskKind::kDflashBlock, 64},
  };
}

// The probabilities of head h: p[i * T + j], exactly 0 where masked.
std::vector<double> probabilities(const AttentionShape& s, const std::vector<double>& q,
                                  const std::vector<double>& k, int64_t h,
                                  std::vector<double>* lse) {
  const int64_t t_count = s.tokens(), d = s.head_dim, g = h / (s.heads / s.kv_heads);
  const int64_t qw = s.heads * d, kw = s.kv_heads * d;
  const double scale = s.params().scale;
  std::vector<int64_t> doc(static_cast<size_t>(t_count)), pos(static_cast<size_t>(t_count));
  std::vector<int32_t> cu = s.cu_seqlens();
  for (size_t n = 0; n + 1 < cu.size(); ++n)
    for (int32_t t = cu[n]; t < cu[n + 1]; ++t) {
      doc[static_cast<size_t>(t)] = static_cast<int64_t>(n);
      pos[static_cast<size_t>(t)] = t - cu[n];
    }
  auto visible = [&](int64_t i, int64_t j) {
    const bool same = doc[static_cast<size_t>(i)] == doc[static_cast<size_t>(j)];
    const int64_t pi = pos[static_cast<size_t>(i)], pj = pos[static_cast<size_t>(j)];
    switch (s.kind()) {
      case AttentionMaskKind::kCausal:
        return j <= i;
      case AttentionMaskKind::kSlidingWindow:
        return same && j <= i && pi - pj < s.window;
      case AttentionMaskKind::kDflashBlock:
        return same && pj / s.mask_block <= pi / s.mask_block;
      case AttentionMaskKind::kDocument:
        break;
    }
    return same && j <= i;
  };
  std::vector<double> p(static_cast<size_t>(t_count * t_count), 0.0);
  for (int64_t i = 0; i < t_count; ++i) {
    double max = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < t_count; ++j) {
      if (!visible(i, j)) continue;
      double dot = 0;
      for (int64_t x = 0; x < d; ++x)
        dot +=
            q[static_cast<size_t>(i * qw + h * d + x)] * k[static_cast<size_t>(j * kw + g * d + x)];
      p[static_cast<size_t>(i * t_count + j)] = dot * scale;
      max = std::max(max, dot * scale);
    }
    for (int64_t j = 0; j < t_count; ++j)
      if (visible(i, j)) sum += std::exp(p[static_cast<size_t>(i * t_count + j)] - max);
    for (int64_t j = 0; j < t_count; ++j) {
      double& pij = p[static_cast<size_t>(i * t_count + j)];
      pij = visible(i, j) ? std::exp(pij - max) / sum : 0.0;
    }
    if (lse) (*lse)[static_cast<size_t>(h * t_count + i)] = max + std::log(sum);
  }
  return p;
}

// out (T, H*D) and lse (H, T).
Values forward_reference(const AttentionShape& s, const std::vector<double>& q,
                         const std::vector<double>& k, const std::vector<double>& v) {
  const int64_t t_count = s.tokens(), d = s.head_dim, qw = s.heads * d, kw = s.kv_heads * d;
  std::vector<double> out(static_cast<size_t>(t_count * qw), 0.0);
  std::vector<double> lse(static_cast<size_t>(s.heads * t_count), 0.0);
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t g = h / (s.heads / s.kv_heads);
    std::vector<double> p = probabilities(s, q, k, h, &lse);
    for (int64_t i = 0; i < t_count; ++i)
      for (int64_t j = 0; j < t_count; ++j) {
        double pij = p[static_cast<size_t>(i * t_count + j)];
        if (pij == 0) continue;
        for (int64_t x = 0; x < d; ++x)
          out[static_cast<size_t>(i * qw + h * d + x)] +=
              pij * v[static_cast<size_t>(j * kw + g * d + x)];
      }
  }
  return {{"out", out}, {"lse", lse}};
}

// The gradients of sum(out * d_out); D_i from `out` as given (the kernel's
// input), the probabilities recomputed exactly.
Values backward_reference(const AttentionShape& s, const OpRun& run) {
  const std::vector<double>&q = run.v("q"), &k = run.v("k"), &v = run.v("v"), &out = run.v("out"),
        &d_out = run.v("d_out");
  const int64_t t_count = s.tokens(), d = s.head_dim, qw = s.heads * d, kw = s.kv_heads * d;
  const double scale = s.params().scale;
  std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t g = h / (s.heads / s.kv_heads);
    std::vector<double> p = probabilities(s, q, k, h, nullptr);
    for (int64_t i = 0; i < t_count; ++i) {
      double delta = 0;
      for (int64_t x = 0; x < d; ++x)
        delta += d_out[static_cast<size_t>(i * qw + h * d + x)] *
                 out[static_cast<size_t>(i * qw + h * d + x)];
      for (int64_t j = 0; j < t_count; ++j) {
        const double pij = p[static_cast<size_t>(i * t_count + j)];
        if (pij == 0) continue;
        double dp = 0;
        for (int64_t x = 0; x < d; ++x) {
          const double dyx = d_out[static_cast<size_t>(i * qw + h * d + x)];
          dp += dyx * v[static_cast<size_t>(j * kw + g * d + x)];
          dv[static_cast<size_t>(j * kw + g * d + x)] += pij * dyx;
        }
        const double ds = pij * (dp - delta) * scale;
        for (int64_t x = 0; x < d; ++x) {
          dq[static_cast<size_t>(i * qw + h * d + x)] +=
              ds * k[static_cast<size_t>(j * kw + g * d + x)];
          dk[static_cast<size_t>(j * kw + g * d + x)] +=
              ds * q[static_cast<size_t>(i * qw + h * d + x)];
        }
      }
    }
  }
  return {{"dq", dq}, {"dk", dk}, {"dv", dv}};
}

void add_qkv(OpRun& r, const AttentionShape& s) {
  const int64_t t = s.tokens();
  r.add(random_operand("q", {t, s.heads * s.head_dim}, s.dtype, 1));
  r.add(random_operand("k", {t, s.kv_heads * s.head_dim}, s.dtype, 2));
  r.add(random_operand("v", {t, s.kv_heads * s.head_dim}, s.dtype, 3));
}

struct AttentionForwardCase {
  static constexpr Op kOp = Op::kAttentionForward;
  using Params = AttentionShape;
  static std::vector<Params> params() { return attention_shapes(); }
  static std::string name(const Params& p) { return p.name(); }
  static OpRun build(const Params& s) {
    OpRun r;
    add_qkv(r, s);
    r.add(written("out", {s.tokens(), s.heads * s.head_dim}, s.dtype));
    r.add(written("lse", {s.heads, s.tokens()}, kF32));
    r.call = [s](Backend& be, OpRun& run) {
      be.attention_forward(run.t("q"), run.t("k"), run.t("v"), s.cu_seqlens(), s.params(),
                           run.t("out"), run.t("lse"));
    };
    r.reference = [s](const OpRun& run) {
      return forward_reference(s, run.v("q"), run.v("k"), run.v("v"));
    };
    return r;
  }
};

struct AttentionBackwardCase {
  static constexpr Op kOp = Op::kAttentionBackward;
  using Params = AttentionShape;
  static std::vector<Params> params() {
    std::vector<Params> list = attention_shapes();
    list.push_back({kF32, {5, 4}, 2, 1, 4, 4, 0, true});  // 3 tiles of 4, GQA
    list.push_back({kF32, {7}, 2, 2, 4, 4, 3, true});     // window
    list.push_back({kF32, {5, 6}, 2, 1, 4, 4, 0, true, AttentionMaskKind::kCausal});
    list.push_back({kF32, {9, 4}, 2, 1, 4, 4, 0, true, AttentionMaskKind::kDflashBlock, 3});
    return list;
  }
  static std::string name(const Params& p) { return p.name(); }
  static OpRun build(const Params& s) {
    const int64_t t = s.tokens(), qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
    OpRun r;
    r.add(random_operand("d_out", {t, qw}, s.dtype, 4, 1.0, Category::kGrad));
    add_qkv(r, s);
    // out and lse as forward saved them (out in the dtype, lse fp32).
    Values fwd = forward_reference(s, r.v("q"), r.v("k"), r.v("v"));
    r.add(given("out", {t, qw}, s.dtype, fwd["out"]));
    r.add(given("lse", {s.heads, t}, kF32, fwd["lse"]));
    r.add(written("dq", {t, qw}, s.dtype, Category::kGrad));
    r.add(written("dk", {t, kw}, s.dtype, Category::kGrad));
    r.add(written("dv", {t, kw}, s.dtype, Category::kGrad));
    r.call = [s](Backend& be, OpRun& run) {
      be.attention_backward(run.t("d_out"), run.t("q"), run.t("k"), run.t("v"), run.t("out"),
                            run.t("lse"), s.cu_seqlens(), s.params(), run.t("dq"), run.t("dk"),
                            run.t("dv"));
    };
    r.reference = [s](const OpRun& run) { return backward_reference(s, run); };
    if (s.fd) {
      std::vector<double> d_out = r.v("d_out");
      r.finite_difference = FiniteDifference{
          {r.v("q"), r.v("k"), r.v("v")},
          {"dq", "dk", "dv"},
          [s, t, qw, kw, d_out](Backend& be, const std::vector<std::vector<double>>& vars) {
            Tensor q = make_tensor(be, {t, qw}, kF32, Category::kActivation, "q", vars[0]);
            Tensor k = make_tensor(be, {t, kw}, kF32, Category::kActivation, "k", vars[1]);
            Tensor v = make_tensor(be, {t, kw}, kF32, Category::kActivation, "v", vars[2]);
            Tensor out = be.empty({t, qw}, kF32, Category::kActivation, "out");
            Tensor lse = be.empty({s.heads, t}, kF32, Category::kActivation, "lse");
            be.attention_forward(q, k, v, s.cu_seqlens(), s.params(), out, lse);
            std::vector<double> o = fetch(be, out);
            double loss = 0;
            for (size_t i = 0; i < o.size(); ++i)
              loss += o[i] * d_out[i];
            return loss;
          }};
    }
    return r;
  }
};

// ---- dense_additive: dense_attention_mask / _forward / _backward ----
// The same shapes (T >= 1) as one packed row, plus padded batches (a row per
// document, equal lengths). The references are the block-sparse ones above:
// the math is the same, only the memory differs.
struct DenseShape {
  AttentionShape shape;
  int64_t rows = 1;

  int64_t seq() const { return shape.tokens() / rows; }
  std::string name() const {
    return shape.name() + (rows > 1 ? "_rows" + std::to_string(rows) : "_one_row");
  }
};

std::vector<DenseShape> dense_shapes(bool with_fd) {
  std::vector<DenseShape> list;
  for (const AttentionShape& s : attention_shapes())
    if (s.tokens() > 0) list.push_back({s, 1});
  list.push_back({{kBF16, {24, 24, 24}, 4, 2, 8}, 3});
  list.push_back({{kF32, {17, 17}, 6, 1, 12, 32, 5}, 2});  // MQA, window
  list.push_back({{kF32, {20, 20}, 2, 2, 8, 64, 0, false, AttentionMaskKind::kDflashBlock, 6}, 2});
  if (with_fd) {
    list.push_back({{kF32, {5, 4}, 2, 1, 4, 4, 0, true}, 1});
    list.push_back({{kF32, {6, 6}, 2, 2, 4, 4, 0, true}, 2});
    list.push_back({{kF32, {9, 4}, 2, 1, 4, 4, 0, true, AttentionMaskKind::kDflashBlock, 3}, 1});
  }
  return list;
}

// The additive mask from the reference's own visibility: 0 or dtype's lowest.
std::vector<double> dense_mask_values(const DenseShape& d) {
  const AttentionShape& s = d.shape;
  const int64_t t_count = s.tokens(), S = d.seq();
  const double lowest = s.dtype == kBF16 ? -3.3895313892515355e38
                        : s.dtype == kF16
                            ? -65504.0
                            : static_cast<double>(std::numeric_limits<float>::lowest());
  // probabilities() is 0 exactly where a key is hidden; q = k = 0 makes every
  // visible probability positive.
  std::vector<double> zeros_q(static_cast<size_t>(t_count * s.heads * s.head_dim), 0.0);
  std::vector<double> zeros_k(static_cast<size_t>(t_count * s.kv_heads * s.head_dim), 0.0);
  std::vector<double> p = probabilities(s, zeros_q, zeros_k, 0, nullptr);
  std::vector<double> mask(static_cast<size_t>(t_count * S));
  for (int64_t i = 0; i < t_count; ++i)
    for (int64_t j = 0; j < S; ++j) {
      const int64_t key = i / S * S + j;
      mask[static_cast<size_t>(i * S + j)] =
          p[static_cast<size_t>(i * t_count + key)] > 0 ? 0 : lowest;
    }
  return mask;
}

// (B, n, S, D) head-major from a (T, KV*D) token-major tensor, each kv head
// repeated to n / KV query heads, times `scale`.
std::vector<double> head_major(const DenseShape& d, const std::vector<double>& x, int64_t from,
                               int64_t to, double scale) {
  const int64_t S = d.seq(), D = d.shape.head_dim;
  std::vector<double> y(static_cast<size_t>(d.rows * to * S * D));
  for (int64_t b = 0; b < d.rows; ++b)
    for (int64_t h = 0; h < to; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t e = 0; e < D; ++e)
          y[static_cast<size_t>(((b * to + h) * S + i) * D + e)] =
              scale * x[static_cast<size_t>(((b * S + i) * from + h / (to / from)) * D + e)];
  return y;
}

// probs (B, H, S, S) from the reference's per-head (T, T) probabilities.
std::vector<double> dense_probs(const DenseShape& d, const std::vector<double>& q,
                                const std::vector<double>& k) {
  const AttentionShape& s = d.shape;
  const int64_t t_count = s.tokens(), S = d.seq();
  std::vector<double> probs(static_cast<size_t>(d.rows * s.heads * S * S));
  for (int64_t h = 0; h < s.heads; ++h) {
    std::vector<double> p = probabilities(s, q, k, h, nullptr);
    for (int64_t b = 0; b < d.rows; ++b)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j)
          probs[static_cast<size_t>(((b * s.heads + h) * S + i) * S + j)] =
              p[static_cast<size_t>((b * S + i) * t_count + b * S + j)];
  }
  return probs;
}

struct DenseAttentionMaskCase {
  static constexpr Op kOp = Op::kDenseAttentionMask;
  using Params = DenseShape;
  static std::vector<Params> params() { return dense_shapes(false); }
  static std::string name(const Params& p) { return p.name(); }
  static OpRun build(const Params& d) {
    OpRun r;
    r.add(written("mask", {d.rows, 1, d.seq(), d.seq()}, d.shape.dtype, Category::kAttention));
    r.call = [d](Backend& be, OpRun& run) {
      Tensor mask = be.dense_attention_mask(d.shape.cu_seqlens(), d.rows, d.shape.params(),
                                            d.shape.dtype, "mask.built");
      be.copy(mask, run.t("mask"));
    };
    r.reference = [d](const OpRun&) { return Values{{"mask", dense_mask_values(d)}}; };
    return r;
  }
};

struct DenseAttentionForwardCase {
  static constexpr Op kOp = Op::kDenseAttentionForward;
  using Params = DenseShape;
  static std::vector<Params> params() { return dense_shapes(false); }
  static std::string name(const Params& p) { return p.name(); }
  static OpRun build(const Params& d) {
    const AttentionShape& s = d.shape;
    const int64_t S = d.seq();
    OpRun r;
    add_qkv(r, s);
    r.add(given("mask", {d.rows, 1, S, S}, s.dtype, dense_mask_values(d), Category::kAttention));
    r.add(written("out", {s.tokens(), s.heads * s.head_dim}, s.dtype));
    r.add(written("probs", {d.rows, s.heads, S, S}, kF32, Category::kAttention));
    r.call = [d](Backend& be, OpRun& run) {
      DenseAttentionSaved saved;
      Tensor out = be.dense_attention_forward(run.t("q"), run.t("k"), run.t("v"), run.t("mask"),
                                              d.shape.params(), "attn", saved);
      be.copy(out, run.t("out"));
      be.copy(saved.probs, run.t("probs"));
    };
    r.reference = [d](const OpRun& run) {
      Values fwd = forward_reference(d.shape, run.v("q"), run.v("k"), run.v("v"));
      return Values{{"out", fwd["out"]}, {"probs", dense_probs(d, run.v("q"), run.v("k"))}};
    };
    return r;
  }
};

struct DenseAttentionBackwardCase {
  static constexpr Op kOp = Op::kDenseAttentionBackward;
  using Params = DenseShape;
  static std::vector<Params> params() { return dense_shapes(true); }
  static std::string name(const Params& p) { return p.name(); }
  static OpRun build(const Params& d) {
    const AttentionShape& s = d.shape;
    const int64_t t = s.tokens(), S = d.seq(), qw = s.heads * s.head_dim,
                  kw = s.kv_heads * s.head_dim;
    const double root = std::sqrt(static_cast<double>(s.params().scale));
    OpRun r;
    r.add(random_operand("d_out", {t, qw}, s.dtype, 4, 1.0, Category::kGrad));
    add_qkv(r, s);
    // out exact (fp32), for the reference's D_i only.
    Values fwd = forward_reference(s, r.v("q"), r.v("k"), r.v("v"));
    r.add(given("out", {t, qw}, kF32, fwd["out"]));
    // What forward saved, as the reference computes it.
    const Shape per_head = {d.rows, s.heads, S, s.head_dim};
    r.add(given("saved.query", per_head, kF32, head_major(d, r.v("q"), s.heads, s.heads, root),
                Category::kAttention));
    r.add(given("saved.key", per_head, kF32, head_major(d, r.v("k"), s.kv_heads, s.heads, root),
                Category::kAttention));
    const bool keeps_v = s.dtype == kF32 && s.heads == s.kv_heads;
    r.add(keeps_v ? given("saved.value", {t, kw}, kF32, r.v("v"), Category::kAttention)
                  : given("saved.value", per_head, kF32,
                          head_major(d, r.v("v"), s.kv_heads, s.heads, 1.0), Category::kAttention));
    r.add(given("saved.probs", {d.rows, s.heads, S, S}, kF32, dense_probs(d, r.v("q"), r.v("k")),
                Category::kAttention));
    r.add(written("dq", {t, qw}, s.dtype, Category::kGrad));
    r.add(written("dk", {t, kw}, s.dtype, Category::kGrad));
    r.add(written("dv", {t, kw}, s.dtype, Category::kGrad));
    r.call = [d](Backend& be, OpRun& run) {
      DenseAttentionSaved saved{run.t("saved.query"), run.t("saved.key"), run.t("saved.value"),
                                run.t("saved.probs")};
      DenseAttentionGrads grads =
          be.dense_attention_backward(run.t("d_out"), saved, d.shape.params(), "attn");
      be.copy(grads.dq, run.t("dq"));
      be.copy(grads.dk, run.t("dk"));
      be.copy(grads.dv, run.t("dv"));
    };
    r.reference = [s](const OpRun& run) { return backward_reference(s, run); };
    // bf16 or fp16 with GQA: each head's gradient is rounded, then the group's sum.
    if (is_half(s.dtype) && s.heads > s.kv_heads)
      r.roundings = 1 + static_cast<int>(s.heads / s.kv_heads);
    if (s.fd) {
      std::vector<double> d_out = r.v("d_out");
      std::vector<double> mask = dense_mask_values(d);
      r.finite_difference = FiniteDifference{
          {r.v("q"), r.v("k"), r.v("v")},
          {"dq", "dk", "dv"},
          [d, t, S, qw, kw, d_out, mask](Backend& be,
                                         const std::vector<std::vector<double>>& vars) {
            Tensor q = make_tensor(be, {t, qw}, kF32, Category::kActivation, "q", vars[0]);
            Tensor k = make_tensor(be, {t, kw}, kF32, Category::kActivation, "k", vars[1]);
            Tensor v = make_tensor(be, {t, kw}, kF32, Category::kActivation, "v", vars[2]);
            Tensor m = make_tensor(be, {d.rows, 1, S, S}, kF32, Category::kAttention, "mask", mask);
            DenseAttentionSaved saved;
            Tensor out = be.dense_attention_forward(q, k, v, m, d.shape.params(), "attn", saved);
            std::vector<double> o = fetch(be, out);
            double loss = 0;
            for (size_t i = 0; i < o.size(); ++i)
              loss += o[i] * d_out[i];
            return loss;
          }};
    }
    return r;
  }
};

}  // namespace

void add_attention_cases(std::vector<OpCase>& cases) {
  add_case<AttentionForwardCase>(cases);
  add_case<AttentionBackwardCase>(cases);
  add_case<DenseAttentionMaskCase>(cases);
  add_case<DenseAttentionForwardCase>(cases);
  add_case<DenseAttentionBackwardCase>(cases);
}

}  // namespace headroom::backend_test
