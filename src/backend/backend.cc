// The front: for each op, the checks, then every allocation, then the kernel.
// What meta plans is what these lines allocate, so nothing here may depend on
// whether kernels_ is set except the kernel call itself.
#include "backend/backend.h"

#include <cstring>
#include <string>
#include <utility>

#include "backend/attention_checks.h"
#include "backend/common/nf4.h"
#include "backend/cross_entropy_checks.h"
#include "backend/kernels.h"
#include "backend/model_op_checks.h"
#include "backend/nf4_checks.h"
#include "backend/op_checks.h"
#include "util/error.h"

namespace headroom {

Backend::Backend(Allocator& allocator, BackendKind kind, TargetDevice target,
                 std::unique_ptr<GemmWorkspace> gemm_workspace, std::unique_ptr<Kernels> kernels)
    : allocator_(&allocator),
      kind_(kind),
      target_(target),
      gemm_workspace_(std::move(gemm_workspace)),
      kernels_(std::move(kernels)) {
  HR_CHECK(gemm_workspace_ != nullptr, "Backend: no gemm workspace rule");
  HR_CHECK((kind_ == BackendKind::kMeta) == (kernels_ == nullptr),
           "Backend: " + std::string(name_of(kind_)) +
               (kernels_ ? " cannot have a kernel table" : " needs a kernel table"));
  HR_CHECK(!kernels_ || kernels_->kind() == kind_, "Backend: kernel table of the wrong kind");
}

Backend::~Backend() = default;

bool Backend::supports(Op op) const {
  return kernels_ == nullptr || kernels_->supports(op);
}

void* Backend::device_stream() const {
  return kernels_ != nullptr ? kernels_->device_stream() : nullptr;
}

void Backend::require(Op op) const {
  if (!supports(op))
    throw InternalError(std::string(name_of(op)) + ": the " + std::string(name_of(kind_)) +
                        " kernel table has no kernel for it");
}

void Backend::fill(Tensor& x, float value) {
  check_fill(kind_, x, value);
  require(Op::kFill);
  if (kernels_) kernels_->fill(x, value);
}

void Backend::fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) {
  check_fill_uniform(kind_, x, lo, hi);
  require(Op::kFillUniform);
  if (kernels_) kernels_->fill_uniform(x, seed, lo, hi);
}

void Backend::copy(const Tensor& src, Tensor& dst) {
  check_copy(kind_, src, dst);
  require(Op::kCopy);
  if (kernels_) kernels_->copy(src, dst);
}

Tensor Backend::cast(const Tensor& x, DType dtype, Category category, std::string_view tag) {
  check_cast(kind_, x, dtype);
  require(Op::kCast);
  Tensor out = empty(x.shape(), dtype, category, tag);
  if (kernels_) kernels_->cast(x, out);
  return out;
}

void Backend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  check_add(kind_, a, b, out);
  require(Op::kAdd);
  if (kernels_) kernels_->add(a, b, out);
}

void Backend::dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) {
  check_dropout(kind_, x, p, out);
  require(Op::kDropout);
  if (kernels_) kernels_->dropout(x, p, seed, out);
}

void Backend::gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
                   float alpha, float beta) {
  const GemmDims dims = check_gemm(kind_, a, transpose_a, b, transpose_b, c);
  require(Op::kGemm);
  GemmScratch scratch = gemm_workspace_->allocate(
      *this, make_gemm_key(dims, transpose_a, transpose_b, a.dtype(), c.dtype(), alpha, beta), a, b,
      c);
  if (kernels_) kernels_->gemm(a, transpose_a, b, transpose_b, c, alpha, beta, dims, scratch);
}

void Backend::gemm_bias(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                        Tensor& c, const Tensor& bias) {
  const GemmDims dims = check_gemm_bias(kind_, a, transpose_a, b, transpose_b, c, bias);
  require(Op::kGemmBias);
  GemmScratch scratch = gemm_workspace_->allocate(
      *this, make_gemm_key(dims, transpose_a, transpose_b, a.dtype(), c.dtype(), 1.0f, 0.0f), a, b,
      c);
  if (kernels_) kernels_->gemm_bias(a, transpose_a, b, transpose_b, c, bias, dims, scratch);
}

SharedGemmOperand Backend::share_gemm_operand(const Tensor& operand) {
  HR_CHECK(operand.defined(), "share_gemm_operand: an undefined tensor");
  return SharedGemmOperand(*gemm_workspace_, operand);
}

SharedGemmOperand::SharedGemmOperand(GemmWorkspace& workspace, const Tensor& operand)
    : workspace_(&workspace), operand_(operand) {
  workspace_->share(operand_);
}

SharedGemmOperand::~SharedGemmOperand() {
  if (workspace_ != nullptr) workspace_->unshare(operand_);
}

SharedGemmOperand::SharedGemmOperand(SharedGemmOperand&& other) noexcept
    : workspace_(std::exchange(other.workspace_, nullptr)), operand_(std::move(other.operand_)) {}

void Backend::copy_from_host(const void* src, Tensor& dst) {
  check_copy_from_host(kind_, src, dst);
  require(Op::kCopyFromHost);
  if (kernels_) kernels_->copy_from_host(src, dst);
}

void Backend::copy_to_host(const Tensor& src, void* dst) {
  check_copy_to_host(kind_, src, dst);
  require(Op::kCopyToHost);
  if (kernels_)
    kernels_->copy_to_host(src, dst);
  else if (src.nbytes() > 0)
    std::memset(dst, 0, src.nbytes());  // a plan has no values; zeros are defined ones
}

void Backend::scale(Tensor& x, float alpha) {
  check_scale(kind_, x);
  require(Op::kScale);
  if (kernels_) kernels_->scale(x, alpha);
}

void Backend::sum_squares(const Tensor& x, Tensor& out) {
  check_sum_squares(kind_, x, out);
  require(Op::kSumSquares);
  if (kernels_) kernels_->sum_squares(x, out);
}

void Backend::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_embedding_forward(kind_, table, ids, out);
  require(Op::kEmbeddingForward);
  if (kernels_) kernels_->embedding_forward(table, ids, out);
}

void Backend::embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table) {
  check_embedding_backward(kind_, d_out, ids, d_table);
  require(Op::kEmbeddingBackward);
  // Held for the call and freed on return.
  Tensor order = allocate_embedding_backward_order(*this, ids);
  if (kernels_) kernels_->embedding_backward(d_out, ids, d_table, order);
}

void Backend::rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                              Tensor& rstd) {
  check_rmsnorm_forward(kind_, x, w, eps, y, rstd);
  require(Op::kRmsnormForward);
  if (kernels_) kernels_->rmsnorm_forward(x, w, eps, y, rstd);
}

void Backend::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                               const Tensor& rstd, Tensor& dx, Tensor& dw) {
  check_rmsnorm_backward(kind_, dy, x, w, rstd, dx, dw);
  require(Op::kRmsnormBackward);
  if (kernels_) kernels_->rmsnorm_backward(dy, x, w, rstd, dx, dw);
}

void Backend::rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta) {
  check_rope("rope_forward", kind_, x, positions, head_dim, theta);
  require(Op::kRopeForward);
  if (kernels_) kernels_->rope_forward(x, positions, head_dim, theta);
}

void Backend::rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim, float theta) {
  check_rope("rope_backward", kind_, dx, positions, head_dim, theta);
  require(Op::kRopeBackward);
  if (kernels_) kernels_->rope_backward(dx, positions, head_dim, theta);
}

void Backend::bias_forward(Tensor& x, const Tensor& bias) {
  check_bias_forward(kind_, x, bias);
  require(Op::kBiasForward);
  if (kernels_) kernels_->bias_forward(x, bias);
}

void Backend::bias_backward(const Tensor& dy, Tensor& d_bias) {
  check_bias_backward(kind_, dy, d_bias);
  require(Op::kBiasBackward);
  if (kernels_) kernels_->bias_backward(dy, d_bias);
}

void Backend::swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  check_swiglu_forward(kind_, gate, up, out);
  require(Op::kSwigluForward);
  if (kernels_) kernels_->swiglu_forward(gate, up, out);
}

void Backend::swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up,
                              Tensor& d_gate, Tensor& d_up) {
  check_swiglu_backward(kind_, d_out, gate, up, d_gate, d_up);
  require(Op::kSwigluBackward);
  if (kernels_) kernels_->swiglu_backward(d_out, gate, up, d_gate, d_up);
}

void Backend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                const std::vector<int32_t>& cu_seqlens,
                                const AttentionParams& params, Tensor& out, Tensor& lse) {
  const AttentionDims dims = check_attention_forward(kind_, q, k, v, cu_seqlens, params, out, lse);
  require(Op::kAttentionForward);
  if (kernels_) kernels_->attention_forward(q, k, v, cu_seqlens, params, dims, out, lse);
}

void Backend::attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& out, const Tensor& lse,
                                 const std::vector<int32_t>& cu_seqlens,
                                 const AttentionParams& params, Tensor& dq, Tensor& dk,
                                 Tensor& dv) {
  const AttentionDims dims =
      check_attention_backward(kind_, d_out, q, k, v, out, lse, cu_seqlens, params, dq, dk, dv);
  require(Op::kAttentionBackward);
  AttentionBackwardScratch scratch = allocate_attention_backward_scratch(*this, dims);
  if (kernels_)
    kernels_->attention_backward(d_out, q, k, v, out, lse, cu_seqlens, params, dims, scratch, dq,
                                 dk, dv);
}

void Backend::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                    Tensor& loss_sum) {
  check_cross_entropy_forward(kind_, logits, targets, lse, loss_sum);
  require(Op::kCrossEntropyForward);
  if (kernels_) kernels_->cross_entropy_forward(logits, targets, lse, loss_sum);
}

void Backend::cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                                     float scale) {
  check_cross_entropy_backward(kind_, logits, targets, lse, scale);
  require(Op::kCrossEntropyBackward);
  if (kernels_) kernels_->cross_entropy_backward(logits, targets, lse, scale);
}

void Backend::adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                           const AdamWParams& params) {
  check_adamw_update(kind_, param, master, grad, m, v, params);
  require(Op::kAdamwUpdate);
  if (kernels_) kernels_->adamw_update(param, master, grad, m, v, params);
}

void Backend::adamw8bit_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, Tensor& m_absmax, Tensor& v_absmax,
                               const AdamWParams& params) {
  check_adamw8bit_update(kind_, param, master, grad, m, v, m_absmax, v_absmax, params);
  require(Op::kAdamw8bitUpdate);
  if (kernels_) kernels_->adamw8bit_update(param, master, grad, m, v, m_absmax, v_absmax, params);
}

Nf4Weight Backend::nf4_empty(const Shape& shape, bool double_quant, Category category,
                             std::string_view tag) const {
  HR_CHECK(shape.size() == 2, "nf4_empty: an NF4 weight is 2-D, got " + shape_to_string(shape));
  const Nf4Sizes sizes = nf4_sizes(numel_of(shape), double_quant);
  const std::string name(tag);
  Nf4Weight q;
  q.shape = shape;
  q.codes = empty({sizes.code_bytes}, DType::kU8, category, name);
  q.absmax =
      empty({sizes.blocks}, double_quant ? DType::kU8 : DType::kF32, category, name + ".absmax");
  if (double_quant) {
    q.absmax2 = empty({sizes.blocks2}, DType::kF32, category, name + ".absmax2");
    q.offset = empty({1}, DType::kF32, category, name + ".offset");
  }
  return q;
}

void Backend::nf4_quantize(const Tensor& w, Nf4Weight& q) {
  check_nf4_quantize(kind_, w, q);
  require(Op::kNf4Quantize);
  Tensor scratch;
  if (q.double_quant())
    scratch = empty({nf4_sizes(q.numel(), true).blocks}, DType::kF32, Category::kWorkspace,
                    std::string(q.codes.tag()) + ".absmax_fp32");
  if (kernels_) kernels_->nf4_quantize(w, scratch, q);
}

Tensor Backend::nf4_dequantize(const Nf4Weight& q, DType dtype, Category category,
                               std::string_view tag) {
  check_nf4_dequantize(kind_, q, dtype);
  require(Op::kNf4Dequantize);
  Tensor scratch;
  if (q.double_quant())
    scratch = empty({nf4_sizes(q.numel(), true).blocks}, DType::kF32, Category::kWorkspace,
                    std::string(tag) + ".absmax");
  Tensor out = empty(q.shape, dtype, category, tag);
  if (kernels_) kernels_->nf4_dequantize(q, scratch, out);
  return out;
}

}  // namespace headroom
