#include "backend/cpu/gemm_plan.h"

#include <malloc.h>

#include <algorithm>
#include <iterator>
#include <string_view>

#include "backend/backend.h"

#include "util/error.h"

namespace headroom {

namespace {

using dnnl::memory;

memory::data_type dnnl_type(DType dtype) {
  return dtype == DType::kBF16  ? memory::data_type::bf16
         : dtype == DType::kF16 ? memory::data_type::f16
                                : memory::data_type::f32;
}

// op(A) is m x k. Stored row-major as [m, k] (strides {k, 1}) or, transposed,
// as [k, m] (strides {1, m}): the same bytes read the other way round.
// `columns` of C's n (all of them, or a block): op(B) and C keep the strides
// of the whole tensors, so a block is a view of them at a column offset
// (CpuKernels::gemm moves B's and C's pointers there).
dnnl::matmul::primitive_desc make_descriptor(const dnnl::engine& engine, const GemmKey& key,
                                             int64_t columns, DType ab, DType c) {
  memory::desc a_md({key.m, key.k}, dnnl_type(ab),
                    key.transpose_a ? memory::dims{1, key.m} : memory::dims{key.k, 1});
  memory::desc b_md({key.k, columns}, dnnl_type(ab),
                    key.transpose_b ? memory::dims{1, key.k} : memory::dims{key.n, 1});
  memory::desc c_md({key.m, columns}, dnnl_type(c), memory::dims{key.n, 1});
  dnnl::primitive_attr attr;
  // The scratchpad comes from our allocator, so it is accounted (and planned).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // oneDNN computes dst = oscale * (A @ B) + sum_scale * dst. Without a sum
  // post-op dst is write-only, so whatever C held (NaN included) cannot leak.
  float alpha = alpha_of(key), beta = beta_of(key);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
}

// Whether oneDNN chose its gemm-based matmul (`gemm:jit`, named as in
// ONEDNN_VERBOSE) rather than its brgemm kernels, which take their buffers
// from the scratchpad.
bool is_gemm_jit(const dnnl::matmul::primitive_desc& descriptor) {
  return std::string_view(descriptor.impl_info_str()).starts_with("gemm:jit");
}

}  // namespace

GemmPlans::GemmPlans() : engine_(dnnl::engine::kind::cpu, 0) {
#if HEADROOM_CPU_AVX2_ONLY
  // The `avx2` preset: oneDNN's kernels as on an AVX2-only CPU. It takes the
  // cap only before its first JIT code, hence once, here, before any primitive.
  static const bool capped = [] {
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    return true;
  }();
  (void)capped;
#endif
  // Our own bounded cache is the only one (see the header); idempotent.
  dnnl::set_primitive_cache_capacity(0);
  // oneDNN's gemm:jit (its fp32 matmul on AVX2 kernels) mallocs packing
  // buffers of about 1 MiB per call and thread and frees them at once.
  // glibc's dynamic mmap threshold rises to the first such block freed, so
  // from then on they come from the arenas, where the holes they leave
  // between longer-lived blocks stay resident: the quickstart's private
  // resident set drifted to 1.19x its plan in 30 steps. A fixed threshold of
  // 1 MiB gives each such buffer its own mapping, returned when freed
  // (1.029, as on AMX). Mapped afresh on every call, such a buffer halved
  // gemm:jit's speed, which is why plans there are blocked into
  // kGemmJitColumns columns: their buffers stay under 1 MiB, in the arenas.
  // Process-wide and idempotent, as the cache capacity above.
  ::mallopt(M_MMAP_THRESHOLD, kMallocMmapThreshold);
}

GemmPlan& GemmPlans::get(const GemmKey& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    used_.splice(used_.begin(), used_, it->second.used);
    return it->second;
  }
  if (plans_.size() >= kPlans) {
    auto oldest = plans_.find(used_.back());
    if (oldest->second.primitive) recent_.erase(oldest->second.recent);
    plans_.erase(oldest);
    used_.pop_back();
  }

  GemmPlan plan;
  plan.key = key;
  if (key.m == 0 || key.n == 0) {
    plan.route = GemmRoute::kNothing;
  } else if (key.k == 0) {
    plan.route = GemmRoute::kScale;
  } else {
    DType ab = key.ab, c = key.c;  // what the primitive reads and writes
    try {
      plan.descriptor = make_descriptor(engine_, key, key.n, ab, c);
      plan.route = GemmRoute::kNative;
    } catch (const dnnl::error& e) {
      // oneDNN runs bf16 from AVX-512 on and fp16 only with AVX-512-FP16:
      // elsewhere both go through fp32 copies.
      if (!is_half(key.ab) || e.status != dnnl_unimplemented)
        throw InternalError("gemm: oneDNN has no matmul for " + to_string(key) + ": " + e.what());
      try {
        ab = c = DType::kF32;
        plan.descriptor = make_descriptor(engine_, key, key.n, ab, c);
        plan.route = GemmRoute::kWidened;
      } catch (const dnnl::error& e2) {
        throw InternalError("gemm: oneDNN has no matmul for " + to_string(key) +
                            ", nor for its fp32 widening: " + e2.what());
      }
    }
    if (blocks_gemm_jit_columns(key) && is_gemm_jit(plan.descriptor)) {
      plan.block_columns = kGemmJitColumns;
      plan.descriptor = make_descriptor(engine_, key, kGemmJitColumns, ab, c);
      if (const int64_t tail = key.n % kGemmJitColumns; tail != 0)
        plan.tail_descriptor = make_descriptor(engine_, key, tail, ab, c);
    }
    plan.scratchpad_bytes = plan.descriptor.scratchpad_desc().get_size();
    if (plan.tail_descriptor)
      plan.scratchpad_bytes = std::max<uint64_t>(plan.scratchpad_bytes,
                                                 plan.tail_descriptor.scratchpad_desc().get_size());
  }
  used_.push_front(key);
  plan.used = used_.begin();
  return plans_.emplace(key, std::move(plan)).first->second;
}

const dnnl::matmul& GemmPlans::primitive(GemmPlan& plan) {
  HR_CHECK(plan.route == GemmRoute::kNative || plan.route == GemmRoute::kWidened,
           "gemm: no oneDNN primitive for " + to_string(plan.key));
  if (plan.executed_step != step_) {
    plan.previously_executed_step = plan.executed_step;
    plan.executed_step = step_;
  }
  if (plan.primitive) {
    recent_.splice(recent_.begin(), recent_, plan.recent);
    return plan.primitive;
  }
  // A smaller capacity than before evicts more than one.
  while (recent_.size() >= capacity_) {
    GemmPlan& oldest = plans_.at(recent_.back());
    oldest.primitive = dnnl::matmul();
    oldest.tail_primitive = dnnl::matmul();
    recent_.pop_back();
  }
  ++made_;
  plan.primitive = dnnl::matmul(plan.descriptor);
  if (plan.tail_descriptor) plan.tail_primitive = dnnl::matmul(plan.tail_descriptor);
  recent_.push_front(plan.key);
  plan.recent = recent_.begin();
  return plan.primitive;
}

void GemmPlans::at_step(int64_t step) {
  if (step == step_) return;
  step_ = step;
  // Executed in two steps at least (while kept), the last of them among
  // the kRecurrenceSteps steps before `step`.
  size_t recurring = 0;
  for (const auto& [key, plan] : plans_)
    if (plan.previously_executed_step != GemmPlan::kNoStep &&
        step - plan.executed_step <= kRecurrenceSteps)
      ++recurring;
  capacity_ = std::clamp(recurring, kExecutablePrimitives, kPlans);
}

namespace {

bool same_operand(const Tensor& x, const Tensor& y) {
  return x.raw() == y.raw() && x.dtype() == y.dtype() && x.shape() == y.shape();
}

}  // namespace

void SharedGemmOperands::share(const Tensor& operand) {
  shared_.push_back({operand, Tensor()});
}

void SharedGemmOperands::unshare(const Tensor& operand) {
  for (auto it = shared_.rbegin(); it != shared_.rend(); ++it) {
    if (same_operand(it->operand, operand)) {
      shared_.erase(std::next(it).base());
      return;
    }
  }
  throw InternalError("gemm: unshare of an operand that is not shared: " + operand.describe());
}

Tensor SharedGemmOperands::fp32_copy(const Backend& backend, const Tensor& x, std::string_view tag,
                                     bool& ready) {
  // The innermost share of x decides: an outer one of the same tensor has
  // the same values, and is dropped later.
  Shared* share = nullptr;
  for (auto it = shared_.rbegin(); it != shared_.rend() && share == nullptr; ++it)
    if (same_operand(it->operand, x)) share = &*it;
  ready = share != nullptr && share->fp32.defined();
  if (ready) return share->fp32;
  Tensor copy = backend.empty(x.shape(), DType::kF32, Category::kWorkspace,
                              share != nullptr ? "gemm.shared_fp32" : tag);
  if (share != nullptr) share->fp32 = copy;
  return copy;
}

bool SharedGemmOperands::overlaps_a_shared_operand(const Tensor& x) const {
  // An empty tensor has no bytes to overlap, wherever it points.
  if (x.nbytes() == 0) return false;
  const auto* begin = static_cast<const char*>(x.raw());
  for (const Shared& share : shared_) {
    const auto* shared_begin = static_cast<const char*>(share.operand.raw());
    if (share.operand.nbytes() > 0 && begin < shared_begin + share.operand.nbytes() &&
        shared_begin < begin + x.nbytes())
      return true;
  }
  return false;
}

GemmScratch HostCpuGemmWorkspace::allocate(const Backend& backend, const GemmKey& key,
                                           const Tensor& a, const Tensor& b, const Tensor& c) {
  plans_.at_step(backend.allocator().step());
  return allocate_gemm_scratch(backend, plans_.get(key), a, b, c, shared_);
}

GemmScratch allocate_gemm_scratch(const Backend& backend, GemmPlan& plan, const Tensor& a,
                                  const Tensor& b, const Tensor& c, SharedGemmOperands& shared) {
  // Checked on every route, though only kWidened keeps copies: a caller
  // breaking the contract would otherwise be found only on an AVX2 host.
  HR_CHECK(!shared.overlaps_a_shared_operand(c),
           "gemm: C (" + c.describe() +
               ") overlaps an operand shared by Backend::share_gemm_operand, which must not "
               "be written until its guard ends");
  GemmScratch scratch;
  scratch.cpu_plan = &plan;
  if (plan.route == GemmRoute::kWidened) {
    scratch.a_fp32 = shared.fp32_copy(backend, a, "gemm.a_fp32", scratch.a_fp32_ready);
    if (same_operand(a, b)) {
      // One copy for both: the kernel widens A's and B reads it.
      scratch.b_fp32 = scratch.a_fp32;
      scratch.b_fp32_ready = true;
    } else {
      scratch.b_fp32 = shared.fp32_copy(backend, b, "gemm.b_fp32", scratch.b_fp32_ready);
    }
    if (c.dtype() != DType::kF32)
      scratch.c_fp32 = backend.empty(c.shape(), DType::kF32, Category::kWorkspace, "gemm.c_fp32");
  }
  if (plan.scratchpad_bytes > 0)
    scratch.scratchpad = backend.empty({static_cast<int64_t>(plan.scratchpad_bytes)}, DType::kU8,
                                       Category::kWorkspace, "gemm.scratchpad");
  return scratch;
}

std::unique_ptr<GemmWorkspace> make_host_cpu_gemm_workspace() {
  return std::make_unique<HostCpuGemmWorkspace>();
}

}  // namespace headroom
