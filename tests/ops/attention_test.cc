// Block-sparse flash attention (cpu) against a float64 reference that
// materializes every head's masked T x T scores; backward against the
// reference's analytic gradients and central finite differences; the tile
// plan against a brute-force classification; determinism across thread
// counts; meta's allocations against cpu's; bad arguments rejected alike.
//
// Tolerances. The reference runs in float64 on the inputs exactly as the
// kernel sees them (bf16 inputs are rounded on upload, and the reference
// reads them back), so only the kernel's own errors remain:
//  - a score q.k sums D fp32 products of magnitude <= 1: error <= D * eps
//    (eps = 6e-8; 4e-6 at D = 64), times scale <= 1/sqrt(8); the softmax
//    turns an absolute score error into the same relative error of each
//    probability, and exp_approx adds ~2 ulp. out = sum p v with sum p = 1 and
//    |v| <= 1, so out and lse are off by a few 1e-6 at most; fp32 allows
//    kF32Tol = 1e-5 absolute (a few times that bound, 10-40x the largest error seen).
//  - gradients are sums over up to T terms of products of such quantities:
//    we scale the same tolerance by the gradient's largest magnitude (at
//    least 1).
//  - bf16 outputs are rounded once, at the end: relative error <= 2^-8 of
//    the value (half an ulp of 7 mantissa bits, plus the fp32 error that may
//    push a value across a rounding boundary). bf16 allows 2^-8 |ref| + kF32Tol.
//  - bf16 on the VDPBF16PS route (have_bf16_dot()) also rounds P and dS to
//    bf16 before P V, dS K, P^T dO and dS^T Q, as FlashAttention-2 does: each
//    term of those sums is off by at most 2^-8 of itself (bf16's unit
//    roundoff), so the error is bounded by 2^-8 times the sum of the terms'
//    magnitudes (sum_j P_ij |v_j| for out, sum_i P_ij |dO_i| for dv,
//    scale sum |dS_ij| |k_j| for dq and scale sum |dS_ij| |q_i| for dk), which
//    the reference computes beside each value; allowed: 2^-7 of it (twice
//    the bound; 2^-10 fails), on top of the above.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "backend/attention_checks.h"
#include "backend/common/attention_tiles.h"
#include "backend/cpu/attention_bf16_dot.h"
#include "backend/cpu/attention_kernels.h"
#include "ops/op_test_util.h"

// exp_approx is instantiated here with the kernels' 32-byte vector type, at
// the end of this file: see attention_kernels.h on -Wpsabi.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace headroom::backend_test {
namespace {

constexpr double kF32Tol = 1e-5;
constexpr double kBf16Rel = 1.0 / 256;

// The share of a sum's term magnitudes a bf16 result may be off by: 2^-7 on
// the VDPBF16PS route, which rounds P and dS to bf16; 0 on the fp32 route.
double bf16_terms_rel() {
  return attention_cpu::have_bf16_dot() ? 1.0 / 128 : 0.0;
}

// ---- layouts ----

// The mask: kDocument with window > 0 is a sliding window (so the older
// layouts keep reading as they did); mask_block is dflash_block's.
struct Layout {
  int64_t tokens = 0, heads = 0, kv_heads = 0, dim = 0, block = 0, window = 0;
  AttentionMaskKind mask = AttentionMaskKind::kDocument;
  int64_t mask_block = 0;
  std::vector<int32_t> cu;
  AttentionMaskKind kind() const { return window > 0 ? AttentionMaskKind::kSlidingWindow : mask; }
  AttentionMask mask_spec() const { return {kind(), window, mask_block}; }
  AttentionParams params() const {
    AttentionParams p;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.head_dim = dim;
    p.block_size = block;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
    p.mask = kind();
    p.window = window;
    p.mask_block = mask_block;
    return p;
  }
  std::string describe() const {
    std::string s = "T=" + std::to_string(tokens) + " H=" + std::to_string(heads) +
                    " KV=" + std::to_string(kv_heads) + " D=" + std::to_string(dim) +
                    " B=" + std::to_string(block) + " mask=" + std::string(name_of(kind())) +
                    " window=" + std::to_string(window) +
                    " mask_block=" + std::to_string(mask_block) + " cu=[";
    for (size_t i = 0; i < cu.size(); ++i)
      s += (i ? "," : "") + std::to_string(cu[i]);
    return s + "]";
  }
};

enum class Docs { kOne, kMany, kWithEmpty };

// One document; or many, cycling through lengths that include 1-token
// documents and lengths that straddle tiles; or many with an empty one.
std::vector<int32_t> make_cu(int64_t tokens, Docs docs) {
  std::vector<int32_t> cu = {0};
  if (docs == Docs::kOne) {
    cu.push_back(static_cast<int32_t>(tokens));
    return cu;
  }
  const int32_t lengths[] = {1, 9, 1, 23, 2, 40, 1, 17};
  for (int i = 0; cu.back() < tokens; ++i) {
    int32_t next = std::min<int32_t>(static_cast<int32_t>(tokens), cu.back() + lengths[i % 8]);
    cu.push_back(next);
    if (docs == Docs::kWithEmpty && i == 1) cu.push_back(next);  // an empty document
  }
  return cu;
}

std::vector<int64_t> document_of(const Layout& l) {
  std::vector<int64_t> doc(static_cast<size_t>(l.tokens));
  for (size_t d = 0; d + 1 < l.cu.size(); ++d)
    for (int32_t t = l.cu[d]; t < l.cu[d + 1]; ++t)
      doc[static_cast<size_t>(t)] = static_cast<int64_t>(d);
  return doc;
}

// The mask as a dense T x T boolean matrix, built from each kind's
// definition with positions counted token by token (never from
// attention_mask.h's intervals, which it checks):
//   document        same document, j <= i
//   causal          j <= i
//   sliding_window  same document, j <= i, pos(i) - pos(j) < window
//   dflash_block    same document, block(j) <= block(i), block = pos / mask_block
struct DenseMask {
  int64_t tokens = 0;
  std::vector<char> bits;  // [i * T + j]
  bool operator()(int64_t i, int64_t j) const {
    return bits[static_cast<size_t>(i * tokens + j)] != 0;
  }
};
DenseMask dense_mask(const Layout& l) {
  const int64_t t_count = l.tokens;
  const std::vector<int64_t> doc = document_of(l);
  std::vector<int64_t> pos(static_cast<size_t>(t_count), 0);
  for (int64_t t = 1; t < t_count; ++t)
    if (doc[static_cast<size_t>(t)] == doc[static_cast<size_t>(t - 1)])
      pos[static_cast<size_t>(t)] = pos[static_cast<size_t>(t - 1)] + 1;
  DenseMask m{t_count, std::vector<char>(static_cast<size_t>(t_count * t_count), 0)};
  for (int64_t i = 0; i < t_count; ++i)
    for (int64_t j = 0; j < t_count; ++j) {
      const bool same = doc[static_cast<size_t>(i)] == doc[static_cast<size_t>(j)];
      const int64_t pi = pos[static_cast<size_t>(i)], pj = pos[static_cast<size_t>(j)];
      bool v = false;
      switch (l.kind()) {
        case AttentionMaskKind::kDocument:
          v = same && j <= i;
          break;
        case AttentionMaskKind::kCausal:
          v = j <= i;
          break;
        case AttentionMaskKind::kSlidingWindow:
          v = same && j <= i && pi - pj < l.window;
          break;
        case AttentionMaskKind::kDflashBlock:
          v = same && pj / l.mask_block <= pi / l.mask_block;
          break;
      }
      m.bits[static_cast<size_t>(i * t_count + j)] = v;
    }
  return m;
}

// ---- float64 reference ----

struct Inputs {
  std::vector<double> q, k, v;  // (T, H*D), (T, KV*D), (T, KV*D)
};

struct Forward {
  std::vector<double> out;        // (T, H*D)
  std::vector<double> lse;        // (H, T)
  std::vector<double> out_terms;  // (T, H*D): sum_j P_ij |v_j|, out's term magnitudes
};

double& at(std::vector<double>& x, int64_t row, int64_t cols, int64_t col) {
  return x[static_cast<size_t>(row * cols + col)];
}
double at(const std::vector<double>& x, int64_t row, int64_t cols, int64_t col) {
  return x[static_cast<size_t>(row * cols + col)];
}

// The probabilities of one head: P[i][j] over the whole T x T square.
std::vector<double> reference_probabilities(const Layout& l, const Inputs& in, int64_t h,
                                            std::vector<double>* lse) {
  const int64_t t_count = l.tokens, d = l.dim, g = h / (l.heads / l.kv_heads);
  const double scale = static_cast<double>(l.params().scale);
  const DenseMask visible = dense_mask(l);
  std::vector<double> p(static_cast<size_t>(t_count * t_count), 0.0);
  for (int64_t i = 0; i < t_count; ++i) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < t_count; ++j) {
      if (!visible(i, j)) continue;
      double s = 0;
      for (int64_t x = 0; x < d; ++x)
        s += at(in.q, i, l.heads * d, h * d + x) * at(in.k, j, l.kv_heads * d, g * d + x);
      at(p, i, t_count, j) = s * scale;
      max = std::max(max, s * scale);
    }
    double sum = 0;
    for (int64_t j = 0; j < t_count; ++j)
      if (visible(i, j)) sum += std::exp(at(p, i, t_count, j) - max);
    for (int64_t j = 0; j < t_count; ++j)
      at(p, i, t_count, j) = visible(i, j) ? std::exp(at(p, i, t_count, j) - max) / sum : 0.0;
    if (lse) (*lse)[static_cast<size_t>(h * t_count + i)] = max + std::log(sum);
  }
  return p;
}

Forward reference_forward(const Layout& l, const Inputs& in) {
  const int64_t t_count = l.tokens, d = l.dim;
  Forward f;
  f.out.assign(static_cast<size_t>(t_count * l.heads * d), 0.0);
  f.lse.assign(static_cast<size_t>(l.heads * t_count), 0.0);
  f.out_terms.assign(f.out.size(), 0.0);
  for (int64_t h = 0; h < l.heads; ++h) {
    const int64_t g = h / (l.heads / l.kv_heads);
    std::vector<double> p = reference_probabilities(l, in, h, &f.lse);
    for (int64_t i = 0; i < t_count; ++i)
      for (int64_t j = 0; j < t_count; ++j) {
        double pij = at(p, i, t_count, j);
        if (pij == 0) continue;
        for (int64_t x = 0; x < d; ++x) {
          const double v = at(in.v, j, l.kv_heads * d, g * d + x);
          at(f.out, i, l.heads * d, h * d + x) += pij * v;
          at(f.out_terms, i, l.heads * d, h * d + x) += pij * std::fabs(v);
        }
      }
  }
  return f;
}

// Analytic gradients of sum(out * d_out). D_i comes from `out` as given: the
// kernel is handed the (possibly bf16-rounded) out, and uses it for D_i.
// `terms`, when given, receives each gradient's term magnitudes (the
// header's list).
Inputs reference_backward(const Layout& l, const Inputs& in, const std::vector<double>& out,
                          const std::vector<double>& d_out, Inputs* terms = nullptr) {
  const int64_t t_count = l.tokens, d = l.dim, hd = l.heads * d, kvd = l.kv_heads * d;
  const double scale = static_cast<double>(l.params().scale);
  Inputs grad;
  grad.q.assign(in.q.size(), 0.0);
  grad.k.assign(in.k.size(), 0.0);
  grad.v.assign(in.v.size(), 0.0);
  Inputs ignored;
  Inputs& mag = terms != nullptr ? *terms : ignored;
  mag.q.assign(in.q.size(), 0.0);
  mag.k.assign(in.k.size(), 0.0);
  mag.v.assign(in.v.size(), 0.0);
  for (int64_t h = 0; h < l.heads; ++h) {
    const int64_t g = h / (l.heads / l.kv_heads);
    std::vector<double> p = reference_probabilities(l, in, h, nullptr);
    for (int64_t i = 0; i < t_count; ++i) {
      double delta = 0;
      for (int64_t x = 0; x < d; ++x)
        delta += at(d_out, i, hd, h * d + x) * at(out, i, hd, h * d + x);
      for (int64_t j = 0; j < t_count; ++j) {
        const double pij = at(p, i, t_count, j);
        if (pij == 0) continue;
        double dp = 0;
        for (int64_t x = 0; x < d; ++x) {
          dp += at(d_out, i, hd, h * d + x) * at(in.v, j, kvd, g * d + x);
          at(grad.v, j, kvd, g * d + x) += pij * at(d_out, i, hd, h * d + x);
          at(mag.v, j, kvd, g * d + x) += pij * std::fabs(at(d_out, i, hd, h * d + x));
        }
        const double ds = pij * (dp - delta);
        for (int64_t x = 0; x < d; ++x) {
          at(grad.q, i, hd, h * d + x) += scale * ds * at(in.k, j, kvd, g * d + x);
          at(grad.k, j, kvd, g * d + x) += scale * ds * at(in.q, i, hd, h * d + x);
          at(mag.q, i, hd, h * d + x) += scale * std::fabs(ds * at(in.k, j, kvd, g * d + x));
          at(mag.k, j, kvd, g * d + x) += scale * std::fabs(ds * at(in.q, i, hd, h * d + x));
        }
      }
    }
  }
  return grad;
}

double reference_loss(const Layout& l, const Inputs& in, const std::vector<double>& r) {
  std::vector<double> out = reference_forward(l, in).out;
  double loss = 0;
  for (size_t i = 0; i < out.size(); ++i)
    loss += out[i] * r[i];
  return loss;
}

// ---- running the kernel ----

struct KernelRun {
  Inputs in;                   // as the kernel saw them
  std::vector<double> out;     // (T, H*D)
  std::vector<double> lse;     // (H, T)
  std::vector<double> d_out;   // when backward ran
  Inputs grad;                 // dq, dk, dv when backward ran
  std::vector<uint8_t> bytes;  // out, lse, dq, dk, dv as raw bytes, for bit comparisons
};

void append_bytes(std::vector<uint8_t>& bytes, const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  bytes.insert(bytes.end(), p, p + t.nbytes());
}

KernelRun run_cpu(
    const Layout& l, DType dtype, bool with_backward, uint64_t seed,
    const std::function<void(std::vector<float>&, std::vector<float>&)>& edit_kv = {}) {
  BackendUnderTest cpu(BackendKind::kCpu);
  Backend& be = *cpu.backend;
  const int64_t hd = l.heads * l.dim, kvd = l.kv_heads * l.dim;
  Tensor q = be.empty({l.tokens, hd}, dtype, Category::kActivation, "q");
  Tensor k = be.empty({l.tokens, kvd}, dtype, Category::kActivation, "k");
  Tensor v = be.empty({l.tokens, kvd}, dtype, Category::kActivation, "v");
  std::vector<float> kv_k = random_values(k.numel(), seed + 1);
  std::vector<float> kv_v = random_values(v.numel(), seed + 2);
  if (edit_kv) edit_kv(kv_k, kv_v);
  upload(q, random_values(q.numel(), seed));
  upload(k, kv_k);
  upload(v, kv_v);
  Tensor out = be.empty({l.tokens, hd}, dtype, Category::kActivation, "out");
  Tensor lse = be.empty({l.heads, l.tokens}, DType::kF32, Category::kActivation, "lse");
  be.fill(out, std::numeric_limits<float>::quiet_NaN());  // written, never read
  be.fill(lse, std::numeric_limits<float>::quiet_NaN());
  be.attention_forward(q, k, v, l.cu, l.params(), out, lse);

  KernelRun run;
  run.in = {download(q), download(k), download(v)};
  run.out = download(out);
  run.lse = download(lse);
  append_bytes(run.bytes, out);
  append_bytes(run.bytes, lse);
  if (!with_backward) return run;

  Tensor d_out = be.empty({l.tokens, hd}, dtype, Category::kGrad, "d_out");
  upload(d_out, random_values(d_out.numel(), seed + 3));
  Tensor dq = be.empty({l.tokens, hd}, dtype, Category::kGrad, "dq");
  Tensor dk = be.empty({l.tokens, kvd}, dtype, Category::kGrad, "dk");
  Tensor dv = be.empty({l.tokens, kvd}, dtype, Category::kGrad, "dv");
  for (Tensor* t : {&dq, &dk, &dv})
    be.fill(*t, std::numeric_limits<float>::quiet_NaN());  // written, not accumulated
  be.attention_backward(d_out, q, k, v, out, lse, l.cu, l.params(), dq, dk, dv);
  run.d_out = download(d_out);
  run.grad = {download(dq), download(dk), download(dv)};
  append_bytes(run.bytes, dq);
  append_bytes(run.bytes, dk);
  append_bytes(run.bytes, dv);
  return run;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x)
    m = std::max(m, std::fabs(v));
  return m;
}

// Every element within atol + rel * |ref| (+ terms_rel * terms, when the
// term magnitudes are given); reports the worst one.
void expect_worst_within(const std::vector<double>& got, const std::vector<double>& ref,
                         double atol, double rel, const std::string& what,
                         const std::vector<double>* terms = nullptr, double terms_rel = 0) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  if (terms != nullptr) {
    ASSERT_EQ(terms->size(), ref.size()) << what;
  }
  size_t worst = 0;
  double worst_excess = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < got.size(); ++i) {
    const double allowed = atol + rel * std::fabs(ref[i]) + (terms ? terms_rel * (*terms)[i] : 0.0);
    double excess = std::fabs(got[i] - ref[i]) - allowed;
    if (std::isnan(excess)) excess = std::numeric_limits<double>::infinity();  // NaN fails
    if (excess > worst_excess) {
      worst = i;
      worst_excess = excess;
    }
  }
  if (got.empty()) return;
  EXPECT_LE(worst_excess, 0) << what << ": element " << worst << " is " << got[worst]
                             << ", reference " << ref[worst];
}

// ---- the tile plan ----

TEST(AttentionTilePlan, CountsOnKnownLayouts) {
  struct Known {
    std::vector<int32_t> cu;
    int64_t block, window;
    int64_t skipped, full, partial;
    AttentionMaskKind mask = AttentionMaskKind::kDocument;
    int64_t mask_block = 0;
  };
  constexpr AttentionMaskKind kCausal = AttentionMaskKind::kCausal;
  constexpr AttentionMaskKind kDflash = AttentionMaskKind::kDflashBlock;
  // T = 256, 4 x 4 tiles of 64.
  const Known known[] = {
      // One document: 4 diagonal tiles partial, the 6 below full, 6 above skipped.
      {{0, 256}, 64, 0, 6, 6, 4},
      // Two tile-aligned documents: cross-document tiles are skipped too.
      {{0, 128, 256}, 64, 0, 10, 2, 4},
      // A boundary at 100 inside tile 1: tiles (1,0), (2,1), (3,1) see part of
      // their keys; only (3,2) is one document below the diagonal.
      {{0, 100, 256}, 64, 0, 8, 1, 7},
      // A 64-token window: the tile just below the diagonal loses the pair
      // 64 apart (partial), the ones further down are out of reach.
      {{0, 256}, 64, 64, 9, 0, 7},
      // A 128-token window: (i, i-1) is full (pairs at most 127 apart),
      // (i, i-2) partial (65..191 apart), (3, 0) out of reach (129 and more).
      {{0, 256}, 64, 128, 7, 3, 6},
      // Ragged: T = 7 in tiles of 4; 1-token documents.
      {{0, 1, 2, 7}, 4, 0, 1, 0, 3},
      // causal ignores the documents: the boundary at 128 skips nothing.
      {{0, 128, 256}, 64, 0, 6, 6, 4, kCausal},
      // dflash blocks of one tile: every tile at or below the diagonal full.
      {{0, 256}, 64, 0, 6, 10, 0, kDflash, 64},
      // Blocks of 100 over tiles of 64 ([0,100), [100,200), [200,256)): rows
      // 64..127 reach key 199, so tiles (0,1), (1,1..3), (2,3), (3,3) are
      // partial, (0,2), (0,3) skipped, the rest full; tile (0, 1) lies
      // above the diagonal and is computed: the interval assumption is gone.
      {{0, 256}, 64, 0, 2, 8, 6, kDflash, 100},
      // Two documents of 128 with blocks of 100: document 2's blocks start
      // at 128 ([128,228), [228,256)).
      {{0, 128, 256}, 64, 0, 8, 4, 4, kDflash, 100},
  };
  for (const Known& k : known) {
    const int64_t tokens = k.cu.back();
    const AttentionMask mask = k.window > 0
                                   ? AttentionMask{AttentionMaskKind::kSlidingWindow, k.window, 0}
                                   : AttentionMask{k.mask, 0, k.mask_block};
    AttentionTilePlan plan = attention_tile_plan(k.cu, tokens, k.block, mask);
    SCOPED_TRACE("cu.back()=" + std::to_string(tokens) + " block=" + std::to_string(k.block) +
                 " mask=" + std::string(name_of(mask.kind)) + " window=" +
                 std::to_string(k.window) + " mask_block=" + std::to_string(k.mask_block));
    EXPECT_EQ(plan.tiles, (tokens + k.block - 1) / k.block);
    EXPECT_EQ(plan.skipped, k.skipped);
    EXPECT_EQ(plan.full, k.full);
    EXPECT_EQ(plan.partial, k.partial);
  }
}

// Each tile's kind from the mask's definition, pair by pair.
TileKind brute_force_kind(const Layout& l, const DenseMask& visible, int64_t i, int64_t j) {
  int64_t seen = 0, pairs = 0;
  for (int64_t a = i * l.block; a < std::min(l.tokens, (i + 1) * l.block); ++a)
    for (int64_t b = j * l.block; b < std::min(l.tokens, (j + 1) * l.block); ++b, ++pairs)
      seen += visible(a, b);
  return seen == 0 ? TileKind::kSkipped : seen == pairs ? TileKind::kFull : TileKind::kPartial;
}

TEST(AttentionTilePlan, MatchesBruteForceClassification) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    Layout l;
    l.tokens = 1 + static_cast<int64_t>(rng() % 150);
    l.block = 1 + static_cast<int64_t>(rng() % 20);
    // Every kind; windows and dflash blocks shorter than a tile, equal to
    // one, and spanning several, at lengths that fit neither.
    switch (rng() % 4) {
      case 0:
        l.mask = AttentionMaskKind::kDocument;
        break;
      case 1:
        l.mask = AttentionMaskKind::kCausal;
        break;
      case 2:
        l.window = 1 + static_cast<int64_t>(rng() % 40);
        break;
      default:
        l.mask = AttentionMaskKind::kDflashBlock;
        l.mask_block = 1 + static_cast<int64_t>(rng() % 40);
        break;
    }
    l.cu = {0};
    while (l.cu.back() < l.tokens) {
      int32_t len = static_cast<int32_t>(rng() % 4 == 0 ? 0 : 1 + rng() % 30);  // some empty
      l.cu.push_back(std::min<int32_t>(static_cast<int32_t>(l.tokens), l.cu.back() + len));
    }
    SCOPED_TRACE(l.describe());
    const DenseMask visible = dense_mask(l);
    AttentionTilePlan plan = attention_tile_plan(l.cu, l.tokens, l.block, l.mask_spec());
    ASSERT_EQ(plan.tiles, (l.tokens + l.block - 1) / l.block);
    int64_t counts[3] = {0, 0, 0};
    for (int64_t i = 0; i < plan.tiles; ++i)
      for (int64_t j = 0; j < plan.tiles; ++j) {
        const TileKind expected = brute_force_kind(l, visible, i, j);
        ASSERT_EQ(plan.kind(i, j), expected) << "tile (" << i << ", " << j << ")";
        ++counts[static_cast<int>(expected)];
        // The kernels visit exactly the computed tiles through the ranges.
        const bool in_row = j >= plan.first_key_tile[i] && j <= plan.last_key_tile[i];
        const bool in_column = i >= plan.first_query_tile[j] && i <= plan.last_query_tile[j];
        ASSERT_EQ(in_row, expected != TileKind::kSkipped) << "row range, tile " << i << ", " << j;
        ASSERT_EQ(in_column, expected != TileKind::kSkipped)
            << "column range, tile " << i << ", " << j;
      }
    EXPECT_EQ(plan.skipped, counts[0]);
    EXPECT_EQ(plan.full, counts[1]);
    EXPECT_EQ(plan.partial, counts[2]);
    // visible_keys is the dense mask's row, and holds the row's own token;
    // the kernels' document_of finds document_start's document.
    const int documents = static_cast<int>(l.cu.size()) - 1;
    for (int64_t i = 0; i < l.tokens; ++i) {
      const int d = headroom::document_of(l.cu.data(), documents, i);
      ASSERT_EQ(l.cu[d], document_start(l.cu, i)) << i;
      ASSERT_TRUE(l.cu[d] <= i && i < l.cu[d + 1]) << i;
      const KeyInterval keys = visible_keys(l.mask_spec(), l.cu, i);
      ASSERT_TRUE(keys.lo <= i && i < keys.hi) << i;
      for (int64_t j = 0; j < l.tokens; ++j)
        ASSERT_EQ(visible(i, j), j >= keys.lo && j < keys.hi) << i << ", " << j;
    }
  }
}

// ---- forward ----

// T not a multiple of the block, T smaller than a block, GQA ratios 2 and 6,
// D of one SIMD width, of one and a half (scalar tails), and of several,
// documents of 1 token, empty ones, windows shorter than a block and
// spanning several.
std::vector<Layout> forward_layouts() {
  std::vector<Layout> layouts;
  for (int64_t tokens : {1, 7, 37, 130})
    for (int64_t block : {16, 32, 64})
      for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 2}, {6, 1}})
        for (int64_t dim : {8, 12, 64})
          for (Docs docs : {Docs::kOne, Docs::kMany, Docs::kWithEmpty})
            for (int64_t variant = 0; variant < 6; ++variant) {
              // The full grid is 1296 layouts; every value of every axis still
              // meets every other in the pairs kept here.
              if ((tokens + block + dim + static_cast<int64_t>(docs) + variant + heads) % 3 != 0)
                continue;
              Layout l;
              l.tokens = tokens;
              l.heads = heads;
              l.kv_heads = kv_heads;
              l.dim = dim;
              l.block = block;
              // document, windows of 5 and 40, causal, dflash blocks of 3 and 16.
              const int64_t windows[] = {0, 5, 40, 0, 0, 0};
              const int64_t blocks[] = {0, 0, 0, 0, 3, 16};
              l.window = windows[variant];
              l.mask_block = blocks[variant];
              l.mask = variant == 3   ? AttentionMaskKind::kCausal
                       : variant >= 4 ? AttentionMaskKind::kDflashBlock
                                      : AttentionMaskKind::kDocument;
              l.cu = make_cu(tokens, docs);
              layouts.push_back(l);
            }
  return layouts;
}

TEST(AttentionForward, MatchesFloat64ReferenceFp32) {
  uint64_t seed = 100;
  for (const Layout& l : forward_layouts()) {
    SCOPED_TRACE(l.describe());
    KernelRun run = run_cpu(l, DType::kF32, false, seed++);
    Forward ref = reference_forward(l, run.in);
    expect_worst_within(run.out, ref.out, kF32Tol, 0, "out");
    expect_worst_within(run.lse, ref.lse, kF32Tol, 0, "lse");
  }
}

TEST(AttentionForward, MatchesFloat64ReferenceBf16) {
  uint64_t seed = 200;
  for (const Layout& l : forward_layouts()) {
    SCOPED_TRACE(l.describe());
    KernelRun run = run_cpu(l, DType::kBF16, false, seed++);
    Forward ref = reference_forward(l, run.in);
    expect_worst_within(run.out, ref.out, kF32Tol, kBf16Rel, "out", &ref.out_terms,
                        bf16_terms_rel());
    expect_worst_within(run.lse, ref.lse, kF32Tol, 0, "lse");  // lse stays fp32
  }
}

// A tile that the plan skips is never read: NaN keys and values in one
// document cannot reach another document's rows through a shared-nothing
// tile. (A masked-but-computed tile would multiply the NaNs by 0: NaN.)
TEST(AttentionForward, SkippedTilesAreNeverRead) {
  Layout l;
  l.tokens = 128;
  l.heads = 2;
  l.kv_heads = 1;
  l.dim = 8;
  l.block = 32;
  l.cu = {0, 64, 128};  // tiles (2|3, 0|1) are cross-document: skipped
  AttentionTilePlan plan = attention_tile_plan(l.cu, l.tokens, l.block, l.mask_spec());
  ASSERT_EQ(plan.skipped, 16 - 6);
  auto poison_first_document = [&](std::vector<float>& k, std::vector<float>& v) {
    for (int64_t t = 0; t < 64; ++t)
      for (int64_t x = 0; x < l.dim; ++x) {
        k[static_cast<size_t>(t * l.dim + x)] = std::numeric_limits<float>::quiet_NaN();
        v[static_cast<size_t>(t * l.dim + x)] = std::numeric_limits<float>::quiet_NaN();
      }
  };
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    KernelRun run = run_cpu(l, dtype, true, 7, poison_first_document);
    const int64_t hd = l.heads * l.dim;
    for (int64_t t = 0; t < l.tokens; ++t)
      for (int64_t x = 0; x < hd; ++x) {
        const double o = run.out[static_cast<size_t>(t * hd + x)];
        const double g = run.grad.q[static_cast<size_t>(t * hd + x)];
        // NaN must reach the poisoned document (it is not silently dropped)
        // and nothing else.
        const bool poisoned = t < 64;
        ASSERT_EQ(std::isnan(o), poisoned) << t;
        ASSERT_EQ(std::isnan(g), poisoned) << t;
      }
    for (int64_t t = 64; t < l.tokens; ++t)
      for (int64_t x = 0; x < l.dim; ++x) {
        ASSERT_TRUE(std::isfinite(run.grad.k[static_cast<size_t>(t * l.dim + x)])) << t;
        ASSERT_TRUE(std::isfinite(run.grad.v[static_cast<size_t>(t * l.dim + x)])) << t;
      }
  }
}

// ---- backward ----

std::vector<Layout> backward_layouts() {
  std::vector<Layout> layouts;
  auto add = [&](int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dim, int64_t block,
                 int64_t window, Docs docs) {
    Layout l;
    l.tokens = tokens;
    l.heads = heads;
    l.kv_heads = kv_heads;
    l.dim = dim;
    l.block = block;
    l.window = window;
    l.cu = make_cu(tokens, docs);
    layouts.push_back(l);
  };
  add(1, 4, 2, 8, 16, 0, Docs::kOne);
  add(7, 6, 1, 8, 16, 0, Docs::kMany);
  add(37, 4, 2, 8, 16, 5, Docs::kMany);
  add(37, 6, 1, 64, 32, 0, Docs::kWithEmpty);
  add(130, 4, 2, 8, 32, 40, Docs::kMany);
  add(130, 6, 1, 64, 64, 0, Docs::kOne);
  add(130, 4, 2, 64, 16, 0, Docs::kWithEmpty);
  add(61, 4, 1, 12, 16, 9, Docs::kMany);
  auto add_mask = [&](AttentionMaskKind mask, int64_t mask_block) {
    layouts.back().mask = mask;
    layouts.back().mask_block = mask_block;
  };
  add(130, 4, 2, 8, 32, 0, Docs::kMany);
  add_mask(AttentionMaskKind::kCausal, 0);
  add(130, 4, 2, 8, 32, 0, Docs::kMany);
  add_mask(AttentionMaskKind::kDflashBlock, 7);  // blocks within and across tiles
  add(130, 6, 1, 64, 16, 0, Docs::kOne);
  add_mask(AttentionMaskKind::kDflashBlock, 50);  // blocks spanning tiles: above the diagonal
  add(37, 4, 2, 12, 16, 0, Docs::kWithEmpty);
  add_mask(AttentionMaskKind::kDflashBlock, 1);
  return layouts;
}

double grad_scale(const Inputs& g) {
  return std::max({1.0, max_abs(g.q), max_abs(g.k), max_abs(g.v)});
}

TEST(AttentionBackward, MatchesAnalyticFloat64Fp32) {
  uint64_t seed = 300;
  for (const Layout& l : backward_layouts()) {
    SCOPED_TRACE(l.describe());
    KernelRun run = run_cpu(l, DType::kF32, true, seed++);
    Inputs ref = reference_backward(l, run.in, reference_forward(l, run.in).out, run.d_out);
    const double tol = kF32Tol * grad_scale(ref);
    expect_worst_within(run.grad.q, ref.q, tol, 0, "dq");
    expect_worst_within(run.grad.k, ref.k, tol, 0, "dk");
    expect_worst_within(run.grad.v, ref.v, tol, 0, "dv");
  }
}

// bf16: the kernel's D_i uses the bf16 out it is given, and so does this
// reference; what is left is fp32 accumulation and one rounding per output.
TEST(AttentionBackward, MatchesAnalyticFloat64Bf16) {
  uint64_t seed = 400;
  for (const Layout& l : backward_layouts()) {
    SCOPED_TRACE(l.describe());
    KernelRun run = run_cpu(l, DType::kBF16, true, seed++);
    Inputs terms;
    Inputs ref = reference_backward(l, run.in, run.out, run.d_out, &terms);
    const double tol = kF32Tol * grad_scale(ref);
    expect_worst_within(run.grad.q, ref.q, tol, kBf16Rel, "dq", &terms.q, bf16_terms_rel());
    expect_worst_within(run.grad.k, ref.k, tol, kBf16Rel, "dk", &terms.k, bf16_terms_rel());
    expect_worst_within(run.grad.v, ref.v, tol, kBf16Rel, "dv", &terms.v, bf16_terms_rel());
  }
}

// The gradients are those of the loss sum(out * R): central differences of
// the float64 reference loss (h = 1e-5: truncation ~h^2, rounding ~1e-16/h,
// both far below the fp32 tolerance) against the cpu kernel and against the
// analytic reference, on every input element of small layouts and on a
// random sample of the larger ones.
TEST(AttentionBackward, MatchesFiniteDifferences) {
  uint64_t seed = 500;
  std::mt19937 pick(3);
  for (const Layout& l : backward_layouts()) {
    SCOPED_TRACE(l.describe());
    KernelRun run = run_cpu(l, DType::kF32, true, seed++);
    Inputs analytic = reference_backward(l, run.in, reference_forward(l, run.in).out, run.d_out);
    const double tol = kF32Tol * grad_scale(analytic);
    struct Target {
      std::vector<double> Inputs::*member;
      const char* name;
    };
    for (Target target :
         {Target{&Inputs::q, "dq"}, Target{&Inputs::k, "dk"}, Target{&Inputs::v, "dv"}}) {
      const size_t n = (run.in.*target.member).size();
      std::vector<size_t> elements;
      for (size_t e = 0; e < n; ++e)
        if (n <= 200 || pick() % (n / 40) == 0) elements.push_back(e);
      for (size_t e : elements) {
        const double h = 1e-5;
        Inputs plus = run.in, minus = run.in;
        (plus.*target.member)[e] += h;
        (minus.*target.member)[e] -= h;
        const double fd =
            (reference_loss(l, plus, run.d_out) - reference_loss(l, minus, run.d_out)) / (2 * h);
        ASSERT_NEAR((analytic.*target.member)[e], fd, 1e-7)
            << target.name << "[" << e << "]: the analytic reference";
        ASSERT_NEAR((run.grad.*target.member)[e], fd, tol) << target.name << "[" << e << "]";
      }
    }
  }
}

// The largest tiles and head_dim the checks accept: the stack-held tile
// buffers are at their full size (attention_checks.h).
TEST(Attention, LargestBlockAndHeadDim) {
  Layout l;
  l.tokens = 300;
  l.heads = 2;
  l.kv_heads = 1;
  l.dim = kMaxAttentionHeadDim;
  l.block = kMaxAttentionBlockSize;
  l.cu = {0, 1, 140, 300};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    KernelRun run = run_cpu(l, dtype, true, 600);
    Forward ref = reference_forward(l, run.in);
    const double rel = dtype == DType::kBF16 ? kBf16Rel : 0.0;
    const double terms_rel = dtype == DType::kBF16 ? bf16_terms_rel() : 0.0;
    expect_worst_within(run.out, ref.out, kF32Tol, rel, "out", &ref.out_terms, terms_rel);
    expect_worst_within(run.lse, ref.lse, kF32Tol, 0, "lse");
    Inputs terms;
    Inputs grad = reference_backward(l, run.in, run.out, run.d_out, &terms);
    const double tol = kF32Tol * grad_scale(grad);
    expect_worst_within(run.grad.q, grad.q, tol, rel, "dq", &terms.q, terms_rel);
    expect_worst_within(run.grad.k, grad.k, tol, rel, "dk", &terms.k, terms_rel);
    expect_worst_within(run.grad.v, grad.v, tol, rel, "dv", &terms.v, terms_rel);
  }
}

// ---- determinism, plan = run, rejected calls ----

// Every output element has one owner summing in a fixed order: the bits
// cannot depend on how many threads share the items.
TEST(Attention, SameBitsOnOneThreadAndMany) {
  Layout l;
  l.tokens = 300;
  l.heads = 4;
  l.kv_heads = 2;
  l.dim = 32;
  l.block = 32;
  l.cu = {0, 3, 150, 151, 300};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t window : {0, 50, -1}) {
      // -1: dflash blocks of 40, whose tiles above the diagonal change the
      // dk / dv ranges.
      l.window = std::max<int64_t>(window, 0);
      l.mask = window < 0 ? AttentionMaskKind::kDflashBlock : AttentionMaskKind::kDocument;
      l.mask_block = window < 0 ? 40 : 0;
      const int saved = omp_get_max_threads();
      omp_set_num_threads(1);
      KernelRun one = run_cpu(l, dtype, true, 9);
      omp_set_num_threads(std::max(saved, 4));  // more threads than cores: same bits
      KernelRun many = run_cpu(l, dtype, true, 9);
      omp_set_num_threads(saved);
      ASSERT_EQ(one.bytes.size(), many.bytes.size());
      EXPECT_EQ(std::memcmp(one.bytes.data(), many.bytes.data(), one.bytes.size()), 0)
          << name_of(dtype) << " window " << window;
    }
  }
}

// forward then backward, as a block does, at sizes whose tensors land in
// both allocator pools (delta over 1 MiB at T = 40000, H = 8).
void forward_backward(Backend& be, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dim,
                      DType dtype, const std::vector<int32_t>& cu) {
  AttentionParams p;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_dim = dim;
  p.block_size = 64;
  p.scale = 0.125f;
  Tensor q = input(be, {tokens, heads * dim}, dtype, "block.0.attn.q", 1);
  Tensor k = input(be, {tokens, kv_heads * dim}, dtype, "block.0.attn.k", 2);
  Tensor v = input(be, {tokens, kv_heads * dim}, dtype, "block.0.attn.v", 3);
  Tensor out = be.empty({tokens, heads * dim}, dtype, Category::kActivation, "block.0.attn.out");
  Tensor lse = be.empty({heads, tokens}, DType::kF32, Category::kAttention, "block.0.attn.lse");
  be.attention_forward(q, k, v, cu, p, out, lse);
  Tensor d_out = input(be, {tokens, heads * dim}, dtype, "block.0.attn.d_out", 4);
  Tensor dq = be.empty({tokens, heads * dim}, dtype, Category::kGrad, "block.0.attn.dq");
  Tensor dk = be.empty({tokens, kv_heads * dim}, dtype, Category::kGrad, "block.0.attn.dk");
  Tensor dv = be.empty({tokens, kv_heads * dim}, dtype, Category::kGrad, "block.0.attn.dv");
  be.attention_backward(d_out, q, k, v, out, lse, cu, p, dq, dk, dv);
}

TEST(AttentionMetaParity, SameAllocatorEventsAsCpu) {
  Scenario scenario = [](Backend& be) {
    forward_backward(be, 37, 6, 1, 8, DType::kF32, {0, 1, 20, 20, 37});
    forward_backward(be, 130, 4, 2, 64, DType::kBF16, {0, 130});
    // 625 documents of one tile each: only the diagonal is computed.
    std::vector<int32_t> cu;
    for (int32_t t = 0; t <= 40000; t += 64)
      cu.push_back(t);
    forward_backward(be, 40000, 8, 8, 1, DType::kBF16, cu);
  };
  expect_same_events(scenario);
}

// Forward allocates nothing; backward holds attention.delta (H, T) fp32 as
// workspace for exactly the call, on both backends.
TEST(AttentionMetaParity, DeltaIsTheOnlyScratchAndIsHeldForTheCall) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kMeta}) {
    BackendUnderTest under_test(kind);
    Backend& be = *under_test.backend;
    AttentionParams p;
    p.heads = 4;
    p.kv_heads = 2;
    p.head_dim = 16;
    p.block_size = 32;
    p.scale = 0.25f;
    const std::vector<int32_t> cu = {0, 50, 77};
    Tensor q = input(be, {77, 64}, DType::kF32, "q", 1);
    Tensor k = input(be, {77, 32}, DType::kF32, "k", 2);
    Tensor v = input(be, {77, 32}, DType::kF32, "v", 3);
    Tensor out = be.empty({77, 64}, DType::kF32, Category::kActivation, "out");
    Tensor lse = be.empty({4, 77}, DType::kF32, Category::kAttention, "lse");
    Tensor d_out = input(be, {77, 64}, DType::kF32, "d_out", 4);
    Tensor dq = be.empty({77, 64}, DType::kF32, Category::kGrad, "dq");
    Tensor dk = be.empty({77, 32}, DType::kF32, Category::kGrad, "dk");
    Tensor dv = be.empty({77, 32}, DType::kF32, Category::kGrad, "dv");
    EventRecorder recorder(under_test.allocator);
    be.attention_forward(q, k, v, cu, p, out, lse);
    EXPECT_TRUE(recorder.events().empty()) << name_of(kind);
    be.attention_backward(d_out, q, k, v, out, lse, cu, p, dq, dk, dv);
    const uint64_t bytes = Allocator::round_size(4 * 77 * sizeof(float));
    const std::vector<EventRecord> expected = {
        {MemoryAction::kAlloc, bytes, Category::kWorkspace, "attention.delta"},
        {MemoryAction::kFree, bytes, Category::kWorkspace, "attention.delta"}};
    EXPECT_EQ(recorder.events(), expected) << name_of(kind);
    EXPECT_EQ(under_test.allocator.live(Category::kWorkspace), 0u);
  }
}

struct BadCall {
  std::string name;
  std::function<void(Backend&)> call;
  std::string message_contains;
};

// A forward call on valid tensors, with one thing changed by `edit`.
void forward_with(
    Backend& be,
    const std::function<void(std::vector<int32_t>&, AttentionParams&, Shape&, DType&)>& edit) {
  std::vector<int32_t> cu = {0, 5, 12};
  AttentionParams p;
  p.heads = 4;
  p.kv_heads = 2;
  p.head_dim = 8;
  p.block_size = 16;
  p.scale = 0.25f;
  Shape lse_shape = {4, 12};
  DType lse_dtype = DType::kF32;
  edit(cu, p, lse_shape, lse_dtype);
  Tensor q = be.empty({12, 32}, DType::kF32, Category::kActivation, "block.1.attn.q");
  Tensor k = be.empty({12, 16}, DType::kF32, Category::kActivation, "block.1.attn.k");
  Tensor v = be.empty({12, 16}, DType::kF32, Category::kActivation, "block.1.attn.v");
  Tensor out = be.empty({12, 32}, DType::kF32, Category::kActivation, "block.1.attn.out");
  Tensor lse = be.empty(lse_shape, lse_dtype, Category::kAttention, "block.1.attn.lse");
  be.attention_forward(q, k, v, cu, p, out, lse);
}

TEST(AttentionChecks, BadCallsThrowTheSameOnCpuAndMetaAndAllocateNothing) {
  using Edit = std::function<void(std::vector<int32_t>&, AttentionParams&, Shape&, DType&)>;
  const std::vector<std::pair<Edit, std::string>> edits = {
      {[](auto& cu, auto&, auto&, auto&) { cu = {}; }, "needs at least 2 entries"},
      {[](auto& cu, auto&, auto&, auto&) { cu = {12}; }, "needs at least 2 entries"},
      {[](auto& cu, auto&, auto&, auto&) {
         cu = {1, 5, 12};
       },
       "cu_seqlens[0] = 1, not 0"},
      {[](auto& cu, auto&, auto&, auto&) {
         cu = {0, 6, 5, 12};
       },
       "cu_seqlens[2] = 5 < cu_seqlens[1] = 6"},
      {[](auto& cu, auto&, auto&, auto&) {
         cu = {0, 5, 11};
       },
       "cu_seqlens[2] = 11 must equal the token count T = 12"},
      {[](auto& cu, auto&, auto&, auto&) {
         cu = {0, 5, 13};
       },
       "must equal the token count"},
      {[](auto&, auto& p, auto&, auto&) { p.kv_heads = 3; }, "multiple of kv_heads"},
      {[](auto&, auto& p, auto&, auto&) { p.scale = 0; }, "scale must be finite and > 0"},
      {[](auto&, auto& p, auto&, auto&) { p.scale = std::numeric_limits<float>::infinity(); },
       "scale must be finite"},
      {[](auto&, auto& p, auto&, auto&) { p.block_size = 0; }, "block_size must be in [1, 128]"},
      {[](auto&, auto& p, auto&, auto&) { p.block_size = 129; }, "block_size must be in"},
      {[](auto&, auto& p, auto&, auto&) { p.window = 4; },
       "window must be 0 unless mask is sliding_window"},
      {[](auto&, auto& p, auto&, auto&) { p.mask = AttentionMaskKind::kSlidingWindow; },
       "window must be >= 1 for mask sliding_window"},
      {[](auto&, auto& p, auto&, auto&) { p.mask = AttentionMaskKind::kDflashBlock; },
       "mask_block must be >= 1 for mask dflash_block"},
      {[](auto&, auto& p, auto&, auto&) { p.mask_block = 16; },
       "mask_block must be 0 unless mask is dflash_block"},
      {[](auto&, auto& p, auto&, auto&) { p.head_dim = 16; },
       "q 'block.1.attn.q' fp32 [12, 32] must be [12, 64]"},
      {[](auto&, auto&, auto& shape, auto&) {
         shape = {12, 4};
       },
       "lse 'block.1.attn.lse'"},
      {[](auto&, auto&, auto&, auto& dtype) { dtype = DType::kBF16; }, "logsumexp is kept in fp32"},
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    std::string messages[2];
    for (int kind = 0; kind < 2; ++kind) {
      BackendUnderTest under_test(kind == 0 ? BackendKind::kCpu : BackendKind::kMeta);
      try {
        forward_with(*under_test.backend, edits[i].first);
        ADD_FAILURE() << "edit " << i << " was accepted";
      } catch (const InternalError& e) {
        messages[kind] = e.what();
      }
      EXPECT_EQ(under_test.allocator.num_live_blocks(), 0u) << "edit " << i;
    }
    EXPECT_EQ(messages[0], messages[1]) << "edit " << i;
    EXPECT_NE(messages[0].find(edits[i].second), std::string::npos)
        << "edit " << i << ": " << messages[0];
    EXPECT_EQ(messages[0].rfind("attention_forward: ", 0), 0u) << messages[0];
  }
}

TEST(AttentionChecks, MessagesNameTheOffendingValues) {
  BackendUnderTest cpu(BackendKind::kCpu);
  try {
    forward_with(*cpu.backend, [](auto& cu, auto&, auto&, auto&) { cu = {0, 6, 5, 12}; });
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "attention_forward: cu_seqlens (4 entries) [0, 6, 5, 12]: cu_seqlens[2] = 5 < "
              "cu_seqlens[1] = 6: offsets must not decrease");
  }
}

TEST(AttentionChecks, BackwardRejectsOverlapAndWrongGradients) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kMeta}) {
    BackendUnderTest under_test(kind);
    Backend& be = *under_test.backend;
    AttentionParams p;
    p.heads = 2;
    p.kv_heads = 1;
    p.head_dim = 4;
    p.block_size = 8;
    p.scale = 0.5f;
    const std::vector<int32_t> cu = {0, 10};
    Tensor q = input(be, {10, 8}, DType::kF32, "q", 1);
    Tensor kv = input(be, {20, 4}, DType::kF32, "kv", 2);
    Tensor k = kv.rows(0, 10), v = kv.rows(10, 20);
    Tensor out = be.empty({10, 8}, DType::kF32, Category::kActivation, "out");
    Tensor lse = be.empty({2, 10}, DType::kF32, Category::kAttention, "lse");
    Tensor d_out = input(be, {10, 8}, DType::kF32, "d_out", 3);
    Tensor dq = be.empty({10, 8}, DType::kF32, Category::kGrad, "dq");
    Tensor dkv = be.empty({20, 4}, DType::kF32, Category::kGrad, "dkv");
    Tensor dk = dkv.rows(0, 10), dv = dkv.rows(10, 20);
    be.attention_forward(q, k, v, cu, p, out, lse);
    EXPECT_NO_THROW(be.attention_backward(d_out, q, k, v, out, lse, cu, p, dq, dk, dv));
    // In-place into an input is a race across tiles.
    EXPECT_THROW(be.attention_backward(d_out, q, k, v, out, lse, cu, p, q, dk, dv), InternalError);
    Tensor dk_overlapping = dkv.rows(5, 15);
    EXPECT_THROW(be.attention_backward(d_out, q, k, v, out, lse, cu, p, dq, dk_overlapping, dv),
                 InternalError);
    Tensor dq_bf16 = be.empty({10, 8}, DType::kBF16, Category::kGrad, "dq_bf16");
    EXPECT_THROW(be.attention_backward(d_out, q, k, v, out, lse, cu, p, dq_bf16, dk, dv),
                 InternalError);
    Tensor out_on_q = q.view({10, 8});
    EXPECT_THROW(be.attention_forward(q, k, v, cu, p, out_on_q, lse), InternalError);
    EXPECT_EQ(under_test.allocator.live(Category::kWorkspace), 0u);
  }
}

// ---- the kernel pieces ----

TEST(AttentionKernels, ExpApproxIsWithinAFewUlp) {
  double worst = 0;
  for (float x = -87.0f; x <= 10.0f; x += 0.000731f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst,
                     std::fabs(static_cast<double>(attention_cpu::exp_approx(x)) - exact) / exact);
  }
  EXPECT_LT(worst, 3e-7);  // 2.5 ulp of fp32 (eps = 1.19e-7)
  EXPECT_EQ(attention_cpu::exp_approx(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(attention_cpu::exp_approx(std::numeric_limits<float>::quiet_NaN())));
  // Eight lanes at once give each lane the scalar's bits (the kernels use
  // both: the scalar in no hot loop, but a test of one must cover the other).
  for (float x0 = -90.0f; x0 <= 90.0f; x0 += 0.37f) {
    attention_cpu::v8f x = {x0,        x0 + 0.01f, x0 - 0.02f, -x0,
                            x0 * 0.5f, x0 * 0.25f, 1e-3f * x0, -0.0f};
    attention_cpu::v8f y = attention_cpu::exp_approx(x);
    for (int lane = 0; lane < 8; ++lane)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[lane]),
                std::bit_cast<uint32_t>(attention_cpu::exp_approx(x[lane])))
          << x[lane];
  }
}

TEST(Attention, EmptyBatchIsANoOp) {
  Layout l;
  l.tokens = 0;
  l.heads = 2;
  l.kv_heads = 2;
  l.dim = 4;
  l.block = 16;
  l.cu = {0, 0};
  KernelRun run = run_cpu(l, DType::kF32, true, 1);
  EXPECT_TRUE(run.out.empty());
}

}  // namespace
}  // namespace headroom::backend_test
