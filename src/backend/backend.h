// Backend: the op list, declared once. A concrete front: each op's method
// checks its operands (backend/*_checks.h), makes every allocation the op
// makes, in order (outputs, then scratch sized by the target device's rules:
// gemm_workspace.h), and then calls the device's kernel table (kernels.h).
//
//   cpu   the front + the cpu table (oneDNN GEMM, OpenMP loops; cpu/).
//   meta  the front alone: the same checks and allocations from an
//         allocator over virtual addresses, no kernel, nothing computed.
//   cuda  the front + the cuda table (the cuda issue); meta with a cuda
//         target already makes its allocations.
// A plan and a run therefore share one code path by construction (DESIGN.md,
// promise 1): the allocations are not mirrored in meta, they are the same
// lines of code.
//
// Contract for every op: shape/dtype errors throw InternalError naming the
// tensors' tags and shapes, before anything is allocated; an op that returns
// a new tensor allocates it from this backend's allocator under the caller's
// category and tag; any scratch memory an op needs is allocated from the same
// allocator (category workspace), so meta accounts for it too.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/common/attention_mask.h"
#include "backend/gemm_workspace.h"
#include "backend/nf4_weight.h"
#include "backend/op.h"
#include "backend/target_device.h"
#include "memory/allocator.h"
#include "tensor/tensor.h"

namespace headroom {

// Block-sparse flash attention over a packed (THD) batch.
struct AttentionParams {
  int64_t heads = 0;        // H: query heads
  int64_t kv_heads = 0;     // KV: key/value heads; H % KV == 0 (GQA: H / KV queries share one)
  int64_t head_dim = 0;     // D
  int64_t block_size = 64;  // tile edge, for queries and keys alike
  float scale = 0;          // softmax scale, usually 1 / sqrt(D)
  // Which keys each query sees (backend/common/attention_mask.h).
  AttentionMaskKind mask = AttentionMaskKind::kDocument;
  // sliding_window only (>= 1 there, 0 otherwise): the query sees itself and
  // window - 1 keys before it, within its document.
  int64_t window = 0;
  // dflash_block only (>= 1 there, 0 otherwise): tokens per block.
  int64_t mask_block = 0;

  AttentionMask mask_spec() const { return {mask, window, mask_block}; }
};

// attention.backend = "dense_additive": attention as PyTorch's SDPA math
// fallback computes it under Hugging Face's 4-D additive mask (modelled on
// _scaled_dot_product_attention_math and _safe_softmax of PyTorch 2.5+, with
// HF transformers' repeat_kv before it; docs/backend.md, dense_attention, lists every
// tensor). The T tokens form B rows of S = T / B tokens (padded: a row per
// document; packed: one row holding the pack). What autograd keeps of one
// call, fp32 whatever the model dtype (PyTorch >= 2.5 upcasts bf16 q, k, v
// for the math path):
struct DenseAttentionSaved {
  Tensor query;  // (B, H, S, D) fp32  q * sqrt(scale)
  Tensor key;    // (B, H, S, D) fp32  k * sqrt(scale), repeated to H heads, read as (B, H, D, S)
  // (B, H, S, D) fp32 v, repeated to H heads; in an fp32 model without GQA
  // PyTorch keeps v itself: then this is the caller's v, (T, KV*D).
  Tensor value;
  Tensor probs;  // (B, H, S, S) fp32  the softmax, the tensor that makes this path quadratic
};
// dense_attention_backward's results, new tensors in q's dtype (category activation).
struct DenseAttentionGrads {
  Tensor dq;  // (T, H*D)
  Tensor dk;  // (T, KV*D)
  Tensor dv;  // (T, KV*D)
};

// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected.
struct AdamWParams {
  float lr = 0;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0;
  int64_t step = 1;         // 1-based: the bias corrections use it
  float grad_scale = 1.0f;  // multiplies the gradient first (global-norm clipping)
};

class Kernels;
class SharedGemmOperand;

class Backend final {
 public:
  // `kernels` null: meta (plans only). Otherwise kernels->kind() is `kind`.
  // `gemm_workspace`: the target's rule; the cpu table executes the plans of
  // a host-cpu rule, so make_backend builds the pair.
  Backend(Allocator& allocator, BackendKind kind, TargetDevice target,
          std::unique_ptr<GemmWorkspace> gemm_workspace, std::unique_ptr<Kernels> kernels);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  BackendKind kind() const { return kind_; }
  TargetDevice target() const { return target_; }
  Allocator& allocator() const { return *allocator_; }
  // Whether this backend runs `op`. meta plans every op; a device's kernel
  // table may lack some (the cuda table grows op by op): calling one it
  // lacks is an InternalError naming the op and the device.
  bool supports(Op op) const;
  // The stream this backend's kernels run on (a cudaStream_t, for lending
  // to the communicator: Communicator::use_device_stream); nullptr for cpu
  // and meta.
  void* device_stream() const;

  // Uninitialized tensor from this backend's allocator.
  Tensor empty(const Shape& shape, DType dtype, Category category, std::string_view tag) const {
    return Tensor::empty(*allocator_, kind(), shape, dtype, category, tag);
  }

  // x[:] = value (floating dtypes; integer dtypes take the value truncated).
  void fill(Tensor& x, float value);
  // x[:] ~ uniform(lo, hi), deterministic in (seed, index): the same values on
  // every backend and thread count.
  void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi);
  // dst[:] = src[:]; same shape, same dtype.
  void copy(const Tensor& src, Tensor& dst);
  // A new tensor holding x converted to `dtype` (round-to-nearest-even to bf16).
  Tensor cast(const Tensor& x, DType dtype, Category category, std::string_view tag);
  // out = a + b, elementwise, same shapes and dtype; out may alias a or b.
  void add(const Tensor& a, const Tensor& b, Tensor& out);
  // out[i] = x[i] * keep(seed, i) / (1 - p): keep(seed, i) (dropout_keeps in
  // backend/common/dropout_mask.h) is 0 with probability p and 1 otherwise, from a
  // counter-based hash of (seed, i), i the flat index within x. The same
  // (seed, p) gives the same mask on every backend and thread count, so the
  // op is its own backward: dropout(dy, p, seed) is exactly dx, and no mask
  // is saved. 0 <= p < 1 (p = 0 copies x). x and out of one shape and dtype
  // (fp32 or bf16; fp32 math, one rounding); out may be x itself. Dropped
  // elements are +0 even where x is inf or NaN. Allocates nothing.
  void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out);
  // C = alpha * op(A) @ op(B) + beta * C, with op(X) = X or X^T.
  // A, B, C are 2-D; A and B share a dtype (fp32 or bf16); C is fp32 or the
  // same dtype as A. Accumulation is always in fp32. beta = 0 ignores C's
  // contents (they may be uninitialized or NaN).
  void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
            float alpha, float beta);
  // C = op(A) @ op(B) + bias, bias (N) of C's dtype added to every row of C
  // (M, N); C's contents are not read. The same gemm as gemm(.., 1, 0) (its
  // workspace and rules), with the bias added where the product is stored
  // when the device's GEMM has that epilogue (cuda: cuBLASLt's
  // CUBLASLT_EPILOGUE_BIAS, one rounding of C instead of two), and as
  // gemm + bias_forward elsewhere.
  void gemm_bias(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
                 const Tensor& bias);
  // While the returned guard lives, the gemms reading `operand` (as A or B,
  // transposed or not) may share one converted copy of it, made by the first
  // and freed with the guard: on the host cpu without a native bf16 matmul
  // (every bf16 operand widened into fp32, cpu/gemm_plan.h) that copy is
  // tagged gemm.shared_fp32; on every other target nothing changes. The
  // caller must not write `operand` while the guard lives. Guards nest and
  // may end in any order. Meta follows the same rule, so a plan holds the
  // copy where a run does.
  [[nodiscard]] SharedGemmOperand share_gemm_operand(const Tensor& operand);

  // ---- host transfer and small reductions ----
  // dst[:] = the dst.nbytes() bytes at src. Meta: nothing.
  void copy_from_host(const void* src, Tensor& dst);
  // The src.nbytes() bytes of src to dst. Meta: writes zeros (a plan has no values).
  void copy_to_host(const Tensor& src, void* dst);
  // x *= alpha, in place.
  void scale(Tensor& x, float alpha);
  // out (1) fp32 += sum(x^2) over x (fp32 or bf16), accumulated in double.
  // A NaN or inf in x makes out non-finite: this is also the non-finite check.
  void sum_squares(const Tensor& x, Tensor& out);

  // ---- model ops; gradients (d*) have the dtype of what they differentiate,
  // math is fp32 inside. "written" outputs are overwritten, "accumulated"
  // ones are added to (weight gradients, across micro-batches). ----

  // out[t, :] = table[ids[t], :]. table (V, C); ids (T) int32; out (T, C), table's dtype.
  // id -1: a token another rank's part of a vocabulary-parallel table holds
  // (model/tensor_parallel.h): its row is 0. Any other id outside [0, V) is
  // an InternalError naming it (the data layer validates first).
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out);
  // d_table[ids[t], :] += d_out[t, :]; d_table (V, C) accumulated; id -1
  // adds nothing.
  void embedding_backward(const Tensor& d_out, const Tensor& ids, Tensor& d_table);

  // y = x / sqrt(mean(x^2) + eps) * w, row-wise over the last dim.
  // x, y (N, C); w (C); rstd (N) fp32 written (saved for backward; y is not needed).
  void rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd);
  // dx (N, C) written; dw (C) accumulated, or undefined for a frozen weight:
  // then no dw is computed and nothing is allocated for it.
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                        Tensor& dx, Tensor& dw);

  // Rotary embedding in place, Hugging Face Llama convention ("rotate_half":
  // element i pairs with i + D/2; inv_freq[i] = theta^(-2i/D), angle =
  // position * inv_freq). x (T, n*D) viewed as (T, n, D); positions (T) int32.
  void rope_forward(Tensor& x, const Tensor& positions, int64_t head_dim, float theta);
  // The transpose (inverse) rotation applied to a gradient in place.
  void rope_backward(Tensor& dx, const Tensor& positions, int64_t head_dim, float theta);

  // x[t, :] += bias[:], in place; x (T, N), bias (N) (Qwen2's q/k/v projections).
  void bias_forward(Tensor& x, const Tensor& bias);
  // d_bias[:] += sum over t of dy[t, :]; d_bias (N) accumulated.
  void bias_backward(const Tensor& dy, Tensor& d_bias);

  // out = silu(gate) * up; gate, up, out (T, F).
  void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
  // d_gate, d_up (T, F) written.
  void swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up, Tensor& d_gate,
                       Tensor& d_up);

  // Flash attention on a packed batch: documents are [cu_seqlens[i],
  // cu_seqlens[i+1]) of T; params.mask says which keys each query sees.
  // q (T, H*D), k and v (T, KV*D); out (T, H*D) written; lse (H, T) fp32
  // written (the only thing saved besides q, k, v, out; the T x T scores are
  // never stored). Tiles fully masked are skipped; tiles fully visible skip
  // the per-element mask. Scratch depends only on shapes.
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                         Tensor& out, Tensor& lse);
  // dq (T, H*D), dk and dv (T, KV*D) written; recomputes the scores tile by tile.
  void attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& out, const Tensor& lse,
                          const std::vector<int32_t>& cu_seqlens, const AttentionParams& params,
                          Tensor& dq, Tensor& dk, Tensor& dv);

  // ---- dense_additive attention (DenseAttentionSaved above) ----
  // The additive mask (B, 1, S, S) in `dtype`, category attention: 0 where
  // params.mask lets query i see key j, dtype's lowest finite value elsewhere
  // (Hugging Face's torch.finfo(dtype).min). `rows` = B divides T; a row
  // boundary is a document boundary, and mask "causal" (which crosses
  // documents) needs B = 1.
  Tensor dense_attention_mask(const std::vector<int32_t>& cu_seqlens, int64_t rows,
                              const AttentionParams& params, DType dtype, std::string_view tag);
  // out = softmax(q k^T * scale + mask) v per head (GQA: H / KV query heads
  // share a kv head), returned as a new (T, H*D) tensor in q's dtype
  // (category activation, tag "<prefix>.out"); `saved` is filled for
  // backward. q (T, H*D), k and v (T, KV*D) of one floating dtype; mask as
  // dense_attention_mask made it, in q's dtype. Every intermediate PyTorch
  // allocates is allocated and freed here in its order (category attention,
  // tags "<prefix>.<name>"), so the plan's peak is the math path's.
  Tensor dense_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& mask, const AttentionParams& params,
                                 std::string_view tag_prefix, DenseAttentionSaved& saved);
  // The gradients of forward's inputs from d_out (T, H*D) in q's dtype.
  // Releases each of saved's tensors when PyTorch's autograd would (after the
  // node that last reads it), so `saved` is empty afterwards.
  DenseAttentionGrads dense_attention_backward(const Tensor& d_out, DenseAttentionSaved& saved,
                                               const AttentionParams& params,
                                               std::string_view tag_prefix);

  // Cross-entropy on one chunk of logits. logits (N, V) fp32 or bf16;
  // targets (N) int32, -1 = not counted, -2 = counted but its target in
  // another rank's part of a vocabulary-parallel head (model/tensor_parallel.h);
  // lse (N) fp32 written (every row); loss_sum (1) fp32 accumulated with sum
  // over rows with a target in [0, V) of lse - logits[target]. A target
  // outside [-2, V) is an InternalError.
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& lse,
                             Tensor& loss_sum);
  // In place: logits <- scale * (softmax(logits) - onehot(target)), using the
  // saved lse; rows with target -1 become 0, rows with target -2 scale *
  // softmax (no onehot here). Afterwards logits holds dlogits.
  void cross_entropy_backward(Tensor& logits, const Tensor& targets, const Tensor& lse,
                              float scale);

  // ---- NF4: QLoRA's frozen base (backend/common/nf4.h, nf4_weight.h) ----
  // Uninitialized storage for a weight of `shape` (2-D) in NF4, under
  // `category`: codes tagged `tag`, absmax "<tag>.absmax", and with double
  // quantization "<tag>.absmax2" and "<tag>.offset". Allocation only, as
  // empty(): bitsandbytes allocates these when it quantizes.
  Nf4Weight nf4_empty(const Shape& shape, bool double_quant, Category category,
                      std::string_view tag) const;
  // q = w in NF4, bitsandbytes' quantize_4bit(w, blocksize = 64, "nf4"): per
  // block of 64 the absmax, then each value times 1 / absmax (fp32) to its
  // nearest code (nf4_code). w fp32 or bf16 of q.shape. With double
  // quantization the fp32 absmax is computed into scratch first (category
  // workspace, "<codes' tag>.absmax_fp32", freed on return) and then
  // quantized as quantize_blockwise(absmax - mean, blocksize = 256) does.
  void nf4_quantize(const Tensor& w, Nf4Weight& q);
  // A new tensor of q.shape in `dtype` (fp32 or bf16) under category/tag:
  // value(code) * absmax, rounded once, as dequantize_4bit computes it. With
  // double quantization dequantize_4bit first rebuilds the fp32 absmax
  // (dynamic map value * absmax2 + offset) into a tensor of its own: scratch
  // here (category workspace, "<tag>.absmax"), allocated before the output
  // and freed after the kernel, so the plan sees both at once.
  Tensor nf4_dequantize(const Nf4Weight& q, DType dtype, Category category, std::string_view tag);

  // ---- optimizer ----
  // One AdamW step on a flat parameter group. param (N) fp32 or bf16; master
  // undefined when param is fp32; for bf16 param, master (N) fp32 or bf16
  // (the update is computed from it in fp32, stored in it and rounded into
  // param), or undefined (the update is computed from param and rounded into
  // it in place: optimizer.master_dtype = "none"); grad (N) param's dtype;
  // m, v (N) fp32.
  void adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWParams& params);
  // One step of bitsandbytes' blockwise 8-bit AdamW (cpu/adamw8bit.cc has
  // the formula): param, master, grad as for adamw_update; m, v (N) uint8
  // codes into the signed / unsigned dynamic map (backend/common/
  // dynamic_map.h); m_absmax, v_absmax (ceil(N / 256)) fp32, one per block
  // of 256 elements counted from the start of param. Codes and absmax are
  // dequantized, updated and requantized in place.
  void adamw8bit_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                        Tensor& m_absmax, Tensor& v_absmax, const AdamWParams& params);

 private:
  // Throws InternalError naming the op and the device when the table lacks it.
  void require(Op op) const;

  Allocator* allocator_;
  BackendKind kind_;
  TargetDevice target_;
  // Destroyed before the allocator: the cuda rule holds a workspace tensor.
  std::unique_ptr<GemmWorkspace> gemm_workspace_;
  std::unique_ptr<Kernels> kernels_;  // null: meta
};

// The one factory: `kind` computes (cpu, cuda) or only plans (meta) for
// `target`. cpu runs on its host, so its target is kHostCpu; cuda runs on
// the device of the process's local rank. Throws InternalError for a pair
// that does not exist, UsageError for cuda in a build without the CUDA
// toolkit or on a machine without a device.
// `cublaslt_workspace_bytes`: a cuda target's workspace (its architecture's,
// memory/device_preset.h); ignored for a host-cpu target.
std::unique_ptr<Backend> make_backend(BackendKind kind, TargetDevice target, Allocator& allocator,
                                      uint64_t cublaslt_workspace_bytes = kCublasLtWorkspaceBytes);

std::unique_ptr<Backend> make_cpu_backend(Allocator& allocator);
// meta for `target`'s allocations (backend/target_device.h).
std::unique_ptr<Backend> make_meta_backend(
    Allocator& allocator, TargetDevice target = TargetDevice::kHostCpu,
    uint64_t cublaslt_workspace_bytes = kCublasLtWorkspaceBytes);

// Backend::share_gemm_operand's guard: ends the share when destroyed.
class SharedGemmOperand {
 public:
  SharedGemmOperand(GemmWorkspace& workspace, const Tensor& operand);
  ~SharedGemmOperand();
  SharedGemmOperand(SharedGemmOperand&& other) noexcept;
  SharedGemmOperand(const SharedGemmOperand&) = delete;
  SharedGemmOperand& operator=(const SharedGemmOperand&) = delete;
  SharedGemmOperand& operator=(SharedGemmOperand&&) = delete;

 private:
  GemmWorkspace* workspace_;  // null once moved from
  Tensor operand_;
};

// What a run on run.backend = "cuda" checks before it locks its folder or
// allocates: a build with the CUDA toolkit, a visible device (the message
// names what cudaGetDeviceCount returned), a cuda kernel for every op the
// run needs, and, when `block_sparse`, flash attention kernels compiled for
// `head_dim`. Throws UsageError (exit 2) naming what is missing.
void require_cuda_run(bool block_sparse, int64_t head_dim);

}  // namespace headroom
