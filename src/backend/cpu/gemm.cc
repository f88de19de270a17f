// gemm: C = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T, via a oneDNN
// matmul primitive (AMX / AVX-512 / AVX2 kernels chosen by oneDNN at run time).
//   fp32 x fp32 -> fp32; bf16 x bf16 -> fp32 or bf16, fp16 x fp16 -> fp32 or
//   fp16, accumulated in fp32 and rounded once, at the end.
//   Transposes are strides in the memory descriptors: nothing is copied.
//   beta = 0: C is write-only (no sum post-op), so NaN garbage in C is ignored.
//   k = 0: C = beta * C. m = 0 or n = 0: nothing.
// One primitive per GemmKey (shape, transposes, dtypes, alpha, beta), made on
// first use and cached in the backend: making one costs milliseconds. On
// oneDNN's gemm:jit (fp32 without AVX-512) C wider than kGemmJitColumns is
// computed in column blocks, one call each (gemm_plan.h says why).
// Allocates (category workspace, freed before returning; see gemm_plan.h):
//   gemm.a_fp32, gemm.b_fp32 [, gemm.c_fp32]  only on the kWidened route (one
//                                             copy when A and B are one tensor)
//   gemm.scratchpad                           only when oneDNN asks for one
// and, for an operand shared by Backend::share_gemm_operand, gemm.shared_fp32
// in place of its gemm.a_fp32 or gemm.b_fp32, held until the share ends.
#include <type_traits>
#include <unordered_map>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/op_checks.h"
#include "util/error.h"

namespace headroom {

namespace {

// C = beta * C, for k = 0, where A @ B is an empty sum.
template <typename T>
void scale_in_place(T* c, int64_t n, float beta) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i)
    store(c + i, beta == 0.0f ? 0.0f : beta * widen(c[i]));
}

// A 16-bit operand's fp32 copy for the kWidened route.
void widen_into(const Tensor& x, Tensor& wide) {
  if (x.dtype() == DType::kF16)
    widen_f16(x.data<f16>(), wide.data<float>(), x.numel());
  else
    widen_bf16(x.data<bf16>(), wide.data<float>(), x.numel());
}

}  // namespace

// The plan (scratch.cpu_plan) already holds the transposes, alpha and beta:
// they are part of its key.
void CpuKernels::gemm(const Tensor& a, bool /*transpose_a*/, const Tensor& b, bool /*transpose_b*/,
                      Tensor& c, float /*alpha*/, float beta, const GemmDims& /*dims*/,
                      GemmScratch& scratch) {
  HR_CHECK(scratch.cpu_plan != nullptr, "gemm: the cpu table needs a host-cpu gemm workspace");
  GemmPlan& plan = *scratch.cpu_plan;

  switch (plan.route) {
    case GemmRoute::kNothing:
      return;
    case GemmRoute::kScale:
      with_floating_type(c.dtype(),
                         [&]<typename T>(T*) { scale_in_place(c.data<T>(), c.numel(), beta); });
      return;
    case GemmRoute::kNative:
    case GemmRoute::kWidened:
      break;
  }

  // The tensors the primitive reads and writes: the operands themselves, or
  // on kWidened their fp32 copies (a bf16 C is read only when beta != 0).
  void* a_data = a.raw();
  void* b_data = b.raw();
  void* c_data = c.raw();
  if (plan.route == GemmRoute::kWidened) {
    // A copy that is ready holds its operand already (a shared operand
    // widened by an earlier gemm, or B = A widened just before).
    if (!scratch.a_fp32_ready) widen_into(a, scratch.a_fp32);
    if (!scratch.b_fp32_ready) widen_into(b, scratch.b_fp32);
    a_data = scratch.a_fp32.raw();
    b_data = scratch.b_fp32.raw();
    if (scratch.c_fp32.defined()) {
      if (beta != 0.0f) widen_into(c, scratch.c_fp32);
      c_data = scratch.c_fp32.raw();
    }
  }

  const dnnl::engine& engine = gemm_plans_->engine();
  // One call over `pd`'s columns of C starting at `column`: op(B)'s column j
  // is j elements into B stored as [k, n], j * k stored transposed as [n, k].
  auto execute = [&](const dnnl::matmul::primitive_desc& pd, const dnnl::matmul& primitive,
                     int64_t column) {
    const int64_t b_offset = plan.key.transpose_b ? column * plan.key.k : column;
    char* b_at = static_cast<char*>(b_data) +
                 b_offset * dnnl::memory::data_type_size(pd.weights_desc().data_type());
    char* c_at = static_cast<char*>(c_data) +
                 column * dnnl::memory::data_type_size(pd.dst_desc().data_type());
    // oneDNN takes non-const handles; it only reads src and weights.
    dnnl::memory a_mem(pd.src_desc(), engine, a_data);
    dnnl::memory b_mem(pd.weights_desc(), engine, b_at);
    dnnl::memory c_mem(pd.dst_desc(), engine, c_at);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (scratch.scratchpad.defined())
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(pd.scratchpad_desc(), engine, scratch.scratchpad.raw()));
    primitive.execute(stream_, args);
  };
  const dnnl::matmul& primitive = gemm_plans_->primitive(plan);
  if (plan.block_columns == 0) {
    execute(plan.descriptor, primitive, 0);
  } else {
    int64_t column = 0;
    for (; column + plan.block_columns <= plan.key.n; column += plan.block_columns)
      execute(plan.descriptor, primitive, column);
    if (column < plan.key.n) execute(plan.tail_descriptor, plan.tail_primitive, column);
  }
  stream_.wait();

  if (scratch.c_fp32.defined()) {
    if (c.dtype() == DType::kF16)
      round_to_f16(scratch.c_fp32.data<float>(), c.data<f16>(), c.numel());
    else
      round_to_bf16(scratch.c_fp32.data<float>(), c.data<bf16>(), c.numel());
  }
}

}  // namespace headroom
