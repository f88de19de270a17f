// The ops of the front that have no cuda kernel yet (issue 40's remainder):
// supports() is false for each, so the front (Backend::supports, the
// trainer's check before it allocates) refuses a cuda run that needs one
// with a message naming the op; these bodies are reached only by a caller
// that skipped that check, and say so. None computes anything.
#include <string>

#include "backend/cuda/cuda_kernels.h"
#include "util/error.h"

namespace headroom {

namespace {

[[noreturn]] void refuse(const char* op) {
  throw InternalError(std::string("cuda ") + op +
                      ": no cuda kernel yet (supports() is false; the front should have refused)");
}

}  // namespace

void CudaKernels::fill_uniform(Tensor& /*x*/, uint64_t /*seed*/, float /*lo*/, float /*hi*/) {
  refuse("fill_uniform");
}

void CudaKernels::dropout(const Tensor& /*x*/, float /*p*/, uint64_t /*seed*/, Tensor& /*out*/) {
  refuse("dropout");
}

void CudaKernels::scale(Tensor& /*x*/, float /*alpha*/) {
  refuse("scale");
}

void CudaKernels::sum_squares(const Tensor& /*x*/, Tensor& /*out*/) {
  refuse("sum_squares");
}

void CudaKernels::embedding_forward(const Tensor& /*table*/, const Tensor& /*ids*/,
                                    Tensor& /*out*/) {
  refuse("embedding_forward");
}

void CudaKernels::embedding_backward(const Tensor& /*d_out*/, const Tensor& /*ids*/,
                                     Tensor& /*d_table*/, Tensor& /*order*/) {
  refuse("embedding_backward");
}

void CudaKernels::rmsnorm_forward(const Tensor& /*x*/, const Tensor& /*w*/, float /*eps*/,
                                  Tensor& /*y*/, Tensor& /*rstd*/) {
  refuse("rmsnorm_forward");
}

void CudaKernels::rmsnorm_backward(const Tensor& /*dy*/, const Tensor& /*x*/, const Tensor& /*w*/,
                                   const Tensor& /*rstd*/, Tensor& /*dx*/, Tensor& /*dw*/) {
  refuse("rmsnorm_backward");
}

void CudaKernels::rope_forward(Tensor& /*x*/, const Tensor& /*positions*/, int64_t /*head_dim*/,
                               float /*theta*/) {
  refuse("rope_forward");
}

void CudaKernels::rope_backward(Tensor& /*dx*/, const Tensor& /*positions*/, int64_t /*head_dim*/,
                                float /*theta*/) {
  refuse("rope_backward");
}

void CudaKernels::bias_forward(Tensor& /*x*/, const Tensor& /*bias*/) {
  refuse("bias_forward");
}

void CudaKernels::bias_backward(const Tensor& /*dy*/, Tensor& /*d_bias*/) {
  refuse("bias_backward");
}

void CudaKernels::swiglu_forward(const Tensor& /*gate*/, const Tensor& /*up*/, Tensor& /*out*/) {
  refuse("swiglu_forward");
}

void CudaKernels::swiglu_backward(const Tensor& /*d_out*/, const Tensor& /*gate*/,
                                  const Tensor& /*up*/, Tensor& /*d_gate*/, Tensor& /*d_up*/) {
  refuse("swiglu_backward");
}

void CudaKernels::dense_attention_mask(const std::vector<int32_t>& /*cu_seqlens*/,
                                       const AttentionParams& /*params*/,
                                       const DenseAttentionDims& /*dims*/, Tensor& /*mask*/) {
  refuse("dense_attention_mask");
}

void CudaKernels::dense_attention_heads(const Tensor& /*src*/, Tensor& /*dst*/,
                                        const DenseAttentionDims& /*dims*/, float /*scale*/) {
  refuse("dense_attention_heads");
}

void CudaKernels::dense_attention_scores(const Tensor& /*query*/, const Tensor& /*key*/,
                                         const Tensor& /*mask*/, const DenseAttentionDims& /*dims*/,
                                         Tensor& /*scores*/) {
  refuse("dense_attention_scores");
}

void CudaKernels::dense_attention_softmax(const Tensor& /*scores*/,
                                          const DenseAttentionDims& /*dims*/, Tensor& /*softmax*/,
                                          Tensor& /*neg_inf*/, Tensor& /*neg_inf_rows*/,
                                          Tensor& /*probs*/) {
  refuse("dense_attention_softmax");
}

void CudaKernels::dense_attention_context(const Tensor& /*probs*/, const Tensor& /*value*/,
                                          const DenseAttentionDims& /*dims*/, Tensor& /*out*/) {
  refuse("dense_attention_context");
}

void CudaKernels::dense_attention_context_backward(const Tensor& /*d_out*/, const Tensor& /*probs*/,
                                                   const Tensor& /*value*/,
                                                   const DenseAttentionDims& /*dims*/,
                                                   Tensor& /*d_probs*/, Tensor& /*d_value*/) {
  refuse("dense_attention_context_backward");
}

void CudaKernels::dense_attention_softmax_backward(const Tensor& /*d_probs*/,
                                                   const Tensor& /*probs*/,
                                                   const DenseAttentionDims& /*dims*/,
                                                   Tensor& /*d_scores*/) {
  refuse("dense_attention_softmax_backward");
}

void CudaKernels::dense_attention_scores_backward(const Tensor& /*d_scores*/,
                                                  const Tensor& /*query*/, const Tensor& /*key*/,
                                                  const DenseAttentionDims& /*dims*/,
                                                  Tensor& /*d_query*/, Tensor& /*d_key*/) {
  refuse("dense_attention_scores_backward");
}

void CudaKernels::cross_entropy_forward(const Tensor& /*logits*/, const Tensor& /*targets*/,
                                        Tensor& /*lse*/, Tensor& /*loss_sum*/) {
  refuse("cross_entropy_forward");
}

void CudaKernels::cross_entropy_backward(Tensor& /*logits*/, const Tensor& /*targets*/,
                                         const Tensor& /*lse*/, float /*scale*/) {
  refuse("cross_entropy_backward");
}

void CudaKernels::adamw_update(Tensor& /*param*/, Tensor& /*master*/, const Tensor& /*grad*/,
                               Tensor& /*m*/, Tensor& /*v*/, const AdamWParams& /*params*/) {
  refuse("adamw_update");
}

void CudaKernels::adamw8bit_update(Tensor& /*param*/, Tensor& /*master*/, const Tensor& /*grad*/,
                                   Tensor& /*m*/, Tensor& /*v*/, Tensor& /*m_absmax*/,
                                   Tensor& /*v_absmax*/, const AdamWParams& /*params*/) {
  refuse("adamw8bit_update");
}

void CudaKernels::nf4_quantize(const Tensor& /*w*/, Tensor& /*scratch*/, Nf4Weight& /*q*/) {
  refuse("nf4_quantize");
}

void CudaKernels::nf4_dequantize(const Nf4Weight& /*q*/, Tensor& /*scratch*/, Tensor& /*out*/) {
  refuse("nf4_dequantize");
}

}  // namespace headroom
