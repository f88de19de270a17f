// dropout: out[i] = keep(seed, i) ? x[i] * s : 0, s = 1 / (1 - p) in fp32,
// keep = dropout_keeps (backend/common/dropout_mask.h), i the flat index within x.
// x, out one shape and dtype (fp32 or bf16: fp32 math, one rounding per
// element); out may be x exactly (element i is read before it is written, by
// the same iteration). 0 <= p < 1.
//
// A dropped element is written as +0 by a select, not as x * 0: an inf or NaN
// there does not survive, as it would not in backward (its gradient is 0).
// The op is linear with a 0-or-s diagonal, so it is its own backward: dropout
// of dy with the same (seed, p) is dx, bit for bit.
// Allocates: nothing.
#include "backend/common/dropout_mask.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

template <typename T>
void apply(const T* x, float p, uint64_t seed, T* out, int64_t n) {
  float scale = dropout_scale(p);
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    store(out + i, dropout_keeps(seed, i, p) ? widen(x[i]) * scale : 0.0f);
}

}  // namespace

void CpuKernels::dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) {
  int64_t n = x.numel();
  with_floating_type(x.dtype(),
                     [&]<typename T>(T*) { apply(x.data<T>(), p, seed, out.data<T>(), n); });
}

}  // namespace headroom
