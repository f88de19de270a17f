// The dense_additive attention stages (kernels.h), in plain loops: fp32
// math throughout, as PyTorch's math path runs it once q, k, v are upcast.
// With P = probs, dP = d_probs, dS = d_scores, q' = q * sqrt(scale),
// k' = k * sqrt(scale) (the front applies the square roots):
//   scores = q' k'^T + mask            P = safe_softmax(scores)
//   out = P v
//   dP = d_out v^T                     dv = P^T d_out
//   dS = P * (dP - rowsum(dP * P))     dq' = dS k',  dk' = dS^T q'
// A row's sums run over its keys in order, one thread per row, so results do
// not depend on the thread count. The loops are O(B H S^2 D) like the
// quadratic path they reproduce; this is the reference users compare
// block_sparse with, not a fast kernel.
// Allocates: nothing (the front allocated every stage's tensors).
#include <bit>
#include <cmath>
#include <limits>

#include "backend/common/attention_mask.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"

namespace headroom {

namespace {

// Where row (b, h, s) of a per-head tensor starts: head-major (B, n, S, D)
// or token-major (T, n*D).
struct HeadsLayout {
  int64_t heads, seq, dim;
  bool token_major;

  int64_t row(int64_t b, int64_t h, int64_t s) const {
    return token_major ? ((b * seq + s) * heads + h) * dim : ((b * heads + h) * seq + s) * dim;
  }
};

HeadsLayout layout_of(const Tensor& x, const DenseAttentionDims& d) {
  if (x.dim() == 4) return {x.size(1), d.seq, d.head_dim, false};
  return {x.size(1) / d.head_dim, d.seq, d.head_dim, true};
}

template <typename Src, typename Dst>
void convert_heads(const Tensor& src, Tensor& dst, const DenseAttentionDims& d, float scale) {
  const HeadsLayout from = layout_of(src, d), to = layout_of(dst, d);
  const Src* x = src.data<Src>();
  Dst* y = dst.data<Dst>();
  const int64_t rows = d.rows * to.heads * d.seq, D = d.head_dim;
  const int64_t repeat = to.heads >= from.heads ? to.heads / from.heads : 1;
  const int64_t group = from.heads > to.heads ? from.heads / to.heads : 1;
#pragma omp parallel for schedule(static) if (rows * D >= kMinParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (to.heads * d.seq), h = (r / d.seq) % to.heads, s = r % d.seq;
    Dst* out = y + to.row(b, h, s);
    for (int64_t e = 0; e < D; ++e) {
      float sum = 0;
      for (int64_t g = 0; g < group; ++g)
        sum += widen(x[from.row(b, h / repeat * group + g, s) + e]);
      store(out + e, scale * sum);
    }
  }
}

float lowest_finite(DType dtype) {
  // bf16's lowest is 0xFF7F; rounding -FLT_MAX to bf16 would give -inf.
  // fp16's is -65504 (torch.finfo(torch.float16).min).
  if (dtype == DType::kBF16) return std::bit_cast<float>(0xFF7F0000u);
  if (dtype == DType::kF16) return -65504.0f;
  return std::numeric_limits<float>::lowest();
}

template <typename T>
void fill_mask(const std::vector<int32_t>& cu, const AttentionMask& spec,
               const DenseAttentionDims& d, T* mask, float hidden) {
  const int64_t S = d.seq, T_count = d.tokens();
#pragma omp parallel for schedule(static) if (T_count * S >= kMinParallelElements)
  for (int64_t i = 0; i < T_count; ++i) {
    const int64_t row_start = i / S * S;
    const KeyInterval keys = visible_keys(spec, cu, i);
    T* out = mask + i * S;  // (b, 0, i - row_start, :) with b = i / S
    for (int64_t j = 0; j < S; ++j) {
      const int64_t key = row_start + j;
      store(out + j, key >= keys.lo && key < keys.hi ? 0.0f : hidden);
    }
  }
}

// The (B*H) blocks of S x S scores, one per (row, head).
inline int64_t score_block(const DenseAttentionDims& d, int64_t b, int64_t h) {
  return (b * d.heads + h) * d.seq * d.seq;
}

}  // namespace

void CpuKernels::dense_attention_mask(const std::vector<int32_t>& cu_seqlens,
                                      const AttentionParams& params, const DenseAttentionDims& dims,
                                      Tensor& mask) {
  const float hidden = lowest_finite(mask.dtype());
  with_floating_type(mask.dtype(), [&]<typename T>(T*) {
    fill_mask(cu_seqlens, params.mask_spec(), dims, mask.data<T>(), hidden);
  });
}

void CpuKernels::dense_attention_heads(const Tensor& src, Tensor& dst,
                                       const DenseAttentionDims& dims, float scale) {
  with_floating_type(src.dtype(), [&]<typename S>(S*) {
    with_floating_type(dst.dtype(),
                       [&]<typename D>(D*) { convert_heads<S, D>(src, dst, dims, scale); });
  });
}

void CpuKernels::dense_attention_scores(const Tensor& query, const Tensor& key, const Tensor& mask,
                                        const DenseAttentionDims& d, Tensor& scores) {
  const float *q = query.data<float>(), *k = key.data<float>();
  float* out = scores.data<float>();
  const int64_t S = d.seq, D = d.head_dim, rows = d.rows * d.heads * S;
  with_floating_type(mask.dtype(), [&]<typename M>(M*) {
    const M* hidden = mask.data<M>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / (d.heads * S), h = (r / S) % d.heads, i = r % S;
      const float* qi = q + ((b * d.heads + h) * S + i) * D;
      const int64_t m = (b * S + i) * S;  // mask (b, 0, i, :)
      float* row = out + score_block(d, b, h) + i * S;
      for (int64_t j = 0; j < S; ++j) {
        const float* kj = k + ((b * d.heads + h) * S + j) * D;
        float dot = 0;
        for (int64_t e = 0; e < D; ++e)
          dot += qi[e] * kj[e];
        row[j] = dot + widen(hidden[m + j]);
      }
    }
  });
}

void CpuKernels::dense_attention_softmax(const Tensor& scores, const DenseAttentionDims& d,
                                         Tensor& softmax, Tensor& neg_inf, Tensor& neg_inf_rows,
                                         Tensor& probs) {
  const float* x = scores.data<float>();
  float *sm = softmax.data<float>(), *p = probs.data<float>();
  uint8_t *masked = neg_inf.data<uint8_t>(), *masked_rows = neg_inf_rows.data<uint8_t>();
  const int64_t S = d.seq, rows = d.rows * d.heads * S;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * S;
    float max = kNegInf;
    for (int64_t j = 0; j < S; ++j)
      max = std::max(max, x[o + j]);
    float sum = 0;
    for (int64_t j = 0; j < S; ++j) {
      sm[o + j] = std::exp(x[o + j] - max);
      sum += sm[o + j];
    }
    bool all_masked = true;
    for (int64_t j = 0; j < S; ++j) {
      sm[o + j] /= sum;
      masked[o + j] = x[o + j] == kNegInf;
      all_masked = all_masked && masked[o + j];
    }
    masked_rows[r] = all_masked;
    for (int64_t j = 0; j < S; ++j)
      p[o + j] = all_masked ? 0.0f : sm[o + j];
  }
}

void CpuKernels::dense_attention_context(const Tensor& probs, const Tensor& value,
                                         const DenseAttentionDims& d, Tensor& out) {
  const float *p = probs.data<float>(), *v = value.data<float>();
  float* y = out.data<float>();
  const HeadsLayout vl = layout_of(value, d);
  const int64_t S = d.seq, D = d.head_dim, rows = d.rows * d.heads * S;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (d.heads * S), h = (r / S) % d.heads, i = r % S;
    const float* pi = p + score_block(d, b, h) + i * S;
    float* yi = y + r * D;
    for (int64_t e = 0; e < D; ++e)
      yi[e] = 0;
    for (int64_t j = 0; j < S; ++j) {
      const float* vj = v + vl.row(b, h, j);
      for (int64_t e = 0; e < D; ++e)
        yi[e] += pi[j] * vj[e];
    }
  }
}

void CpuKernels::dense_attention_context_backward(const Tensor& d_out, const Tensor& probs,
                                                  const Tensor& value, const DenseAttentionDims& d,
                                                  Tensor& d_probs, Tensor& d_value) {
  const float *g = d_out.data<float>(), *p = probs.data<float>(), *v = value.data<float>();
  float *dp = d_probs.data<float>(), *dv = d_value.data<float>();
  const HeadsLayout vl = layout_of(value, d);
  const int64_t S = d.seq, D = d.head_dim, rows = d.rows * d.heads * S;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (d.heads * S), h = (r / S) % d.heads, i = r % S;
    const float* gi = g + r * D;
    float* dpi = dp + score_block(d, b, h) + i * S;
    for (int64_t j = 0; j < S; ++j) {
      const float* vj = v + vl.row(b, h, j);
      float dot = 0;
      for (int64_t e = 0; e < D; ++e)
        dot += gi[e] * vj[e];
      dpi[j] = dot;
    }
  }
  // dv row j sums over the queries i: one thread per key row.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (d.heads * S), h = (r / S) % d.heads, j = r % S;
    const float* pb = p + score_block(d, b, h);
    float* dvj = dv + r * D;
    for (int64_t e = 0; e < D; ++e)
      dvj[e] = 0;
    for (int64_t i = 0; i < S; ++i) {
      const float pij = pb[i * S + j];
      const float* gi = g + ((b * d.heads + h) * S + i) * D;
      for (int64_t e = 0; e < D; ++e)
        dvj[e] += pij * gi[e];
    }
  }
}

void CpuKernels::dense_attention_softmax_backward(const Tensor& d_probs, const Tensor& probs,
                                                  const DenseAttentionDims& d, Tensor& d_scores) {
  const float *dp = d_probs.data<float>(), *p = probs.data<float>();
  float* ds = d_scores.data<float>();
  const int64_t S = d.seq, rows = d.rows * d.heads * S;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * S;
    float dot = 0;
    for (int64_t j = 0; j < S; ++j)
      dot += dp[o + j] * p[o + j];
    for (int64_t j = 0; j < S; ++j)
      ds[o + j] = p[o + j] * (dp[o + j] - dot);
  }
}

void CpuKernels::dense_attention_scores_backward(const Tensor& d_scores, const Tensor& query,
                                                 const Tensor& key, const DenseAttentionDims& d,
                                                 Tensor& d_query, Tensor& d_key) {
  const float *ds = d_scores.data<float>(), *q = query.data<float>(), *k = key.data<float>();
  float *dq = d_query.data<float>(), *dk = d_key.data<float>();
  const int64_t S = d.seq, D = d.head_dim, rows = d.rows * d.heads * S;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (d.heads * S), h = (r / S) % d.heads, i = r % S;
    const float* dsi = ds + score_block(d, b, h) + i * S;
    const float* kb = k + (b * d.heads + h) * S * D;
    float* dqi = dq + r * D;
    for (int64_t e = 0; e < D; ++e)
      dqi[e] = 0;
    for (int64_t j = 0; j < S; ++j)
      for (int64_t e = 0; e < D; ++e)
        dqi[e] += dsi[j] * kb[j * D + e];
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (d.heads * S), h = (r / S) % d.heads, j = r % S;
    const float* dsb = ds + score_block(d, b, h);
    const float* qb = q + (b * d.heads + h) * S * D;
    float* dkj = dk + r * D;
    for (int64_t e = 0; e < D; ++e)
      dkj[e] = 0;
    for (int64_t i = 0; i < S; ++i)
      for (int64_t e = 0; e < D; ++e)
        dkj[e] += dsb[i * S + j] * qb[i * D + e];
  }
}

}  // namespace headroom
