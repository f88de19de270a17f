// How the cpu backend runs a gemm of one shape on this machine, decided once
// per shape from oneDNN's answer, and the host-cpu workspace rule built on
// it (gemm_workspace.h).
//
// meta with a host-cpu target uses the same rule: it asks oneDNN the same
// question (same primitive descriptor, hence the same route and scratchpad
// size) and allocates the same GemmScratch, so a plan matches a cpu run byte
// for byte. Both must run on the same machine and thread count: oneDNN
// chooses its implementation, and with it the scratchpad, by CPU ISA and
// threads. That is right for a cpu run, which only runs on its host, and
// wrong for anything else: a cuda target never comes here.
#pragma once

#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <vector>

#include "backend/common/gemm_key.h"
#include "backend/gemm_workspace.h"

namespace headroom {

enum class GemmRoute : uint8_t {
  kNothing,  // m or n is 0: C is empty, nothing to do
  kScale,    // k is 0: C = beta * C (exactly 0 when beta = 0); oneDNN is not called
  kNative,   // one oneDNN matmul on the operands as they are
  // bf16 operands on a CPU oneDNN has no bf16 matmul for (no AVX-512): A and B
  // are widened into fp32 workspace copies (exact), multiplied in fp32, and a
  // bf16 C goes through an fp32 copy rounded once at the end. Same math as
  // kNative, whose bf16 kernels also accumulate in fp32; more memory, which
  // is therefore allocated and accounted like any other.
  kWidened,
};

// Column blocks for oneDNN's `gemm:jit` (its matmul for fp32 on CPUs without
// AVX-512, hence also every kWidened gemm there). With C wider than ~272
// columns gemm:jit mallocs packing buffers of over 1 MiB per call and
// thread, which GemmPlans' fixed mmap threshold maps and faults in afresh on
// every call: ~3 ms a call on the 2-core dev VM, whatever the shape. Up to
// 256 columns it packs nothing that large. So a small gemm is computed in
// blocks of kGemmJitColumns columns, one call each: 2048 x 256 x 688 ran
// 1.9x faster so, 2048 x 512 x 1920 1.1x. Each block re-reads all of op(A),
// which pays only while op(A) stays in the caches from block to block: in a
// training step blocks over an op(A) of 2048 x 1920 or 1920 x 2048 fp32
// (15 MiB) ran 12-27% slower than the whole gemm, while over 2048 x 512 (4
// MiB) they gained 5-12%. Hence the bounds: op(A) of at most
// kGemmJitBlockedSource elements and at most kGemmJitBlockedMacs
// multiply-adds (m * n * k; ~22 ms of work at 2 threads, where the fault is
// a small part; 2048 x 1024 x 4096 blocked: 0.93x). bench/RESULTS.md has
// the figures. Raising the threshold instead recovered the speed but let
// the resident set drift 17% above the plan. Each block is the same product
// over the same k; the blocking depends on the shape only, never on threads.
inline constexpr int64_t kGemmJitColumns = 256;
inline constexpr int64_t kGemmJitBlockedSource = int64_t{1} << 20;  // m * k: 4 MiB of fp32
inline constexpr int64_t kGemmJitBlockedMacs = int64_t{1} << 31;

// Whether a gemm of `key` whose descriptor is gemm:jit is computed in column
// blocks (the bounds above).
inline bool blocks_gemm_jit_columns(const GemmKey& key) {
  return key.n > kGemmJitColumns && key.m * key.k <= kGemmJitBlockedSource &&
         key.m * key.n * key.k <= kGemmJitBlockedMacs;
}

struct GemmPlan {
  GemmKey key;
  GemmRoute route = GemmRoute::kNothing;
  // kNative / kWidened: fp32 operands for kWidened. Its memory descriptors
  // express the transposes as strides over the tensors as stored: no copies.
  dnnl::matmul::primitive_desc descriptor;
  // 0: `descriptor` computes all of C in one call. Otherwise C's columns are
  // computed in blocks of block_columns, one call each, `descriptor` being
  // one full block and `tail_descriptor` the narrower last one (when n is
  // not a multiple): see kGemmJitColumns.
  int64_t block_columns = 0;
  dnnl::matmul::primitive_desc tail_descriptor;
  uint64_t scratchpad_bytes = 0;  // the larger of the two descriptors'
  // Made from `descriptor` (and `tail_descriptor`) when cpu executes the
  // plan (JIT code generation costs milliseconds) and kept while it is among
  // the most recently executed (GemmPlans::kExecutablePrimitives); meta never
  // makes them.
  dnnl::matmul primitive;
  dnnl::matmul tail_primitive;
  std::list<GemmKey>::iterator recent;  // valid while `primitive` is
  std::list<GemmKey>::iterator used;    // this plan's place in GemmPlans' use order
  // The last two training steps in which `primitive` was asked for
  // (GemmPlans::at_step), to tell the keys that recur from step to step;
  // kNoStep when not (yet).
  static constexpr int64_t kNoStep = std::numeric_limits<int64_t>::min();
  int64_t executed_step = kNoStep;
  int64_t previously_executed_step = kNoStep;
};

// Plans by key, made on first use and kept while among the kPlans most
// recently used; their executable primitives while among the capacity()
// most recently executed.
//
// Why bounded: packed batches give every micro-batch its own token count T,
// hence new gemm shapes (M = T) nearly every step. Kept for the run, their
// primitives (JIT code and oneDNN's bookkeeping, ~70 KiB each, malloc'd by
// oneDNN and invisible to headroom's allocator) grew the quickstart's
// resident set by ~30 MiB over 150 steps, and the descriptors (~30 KiB each
// on an AMX host) by more, without end on a long run. Rebuilding an evicted
// descriptor is cheap (microseconds, no JIT) and gives the same scratchpad.
// The constructor also sets oneDNN's own primitive cache to hold nothing
// (dnnl::set_primitive_cache_capacity(0), process-wide): otherwise it keeps
// every evicted primitive alive up to 1024 entries.
//
// How many primitives: kExecutablePrimitives, or more when more keys recur
// from step to step. A step of the quickstart's model at one token count
// executes 16 keys, in the same order every step; with LoRA on every
// projection 25. Least-recently-used over such a cycle longer than the cache
// misses every time: the LoRA quickstart re-made all 25 primitives every
// step (26 ms of a bf16 step here, and ~5.5 ms each for a bf16 brgemm on an
// AMX host). Length buckets (and padded rows of a few lengths) give each
// step one of a few shapes, drawn at random: a shape's keys come back within
// a few steps, seldom in the very next one, and kept by the previous step's
// recurrence alone each change of shape re-made all of them (511 primitives
// in 40 bucketed quickstart steps; counting two executions within 8 steps
// instead still let a rarer bucket's keys drop out and come back: 267). So
// at each new step the capacity becomes the number of kept plans executed
// in two steps at least, the last of them among the last kRecurrenceSteps
// (at least kExecutablePrimitives, at most kPlans): memory for primitives
// that are used again, bounded by the model's gemms times the few shapes
// that come back, not by the data's shapes (113 in those 40 steps). Packed
// bins of ever new token counts recur little (the loss chunks' fixed shapes,
// a count that comes back by chance) and keep about 16. The price is
// resident memory outside the allocator: the bucketed and padded quickstart
// runs' resident sets grew by 0.6-1.8% of their plans (bf16 padded: 1.044
// to 1.062 times it), nothing next to a real model's plan.
class GemmPlans {
 public:
  // Executable primitives kept at least, and descriptors kept (hence also
  // primitives at most). A packed step uses about twenty gemm keys (fwd, dX
  // and dW shapes, loss chunks), all with its own token count: the
  // descriptors hold a few steps' worth. Measured on the quickstart (30
  // steps, AMX host): resident/reserved 1.057 with 32 / 256, 1.025 with 16 /
  // 32, at the same tokens/s; JIT costs little next to a step.
  static constexpr size_t kExecutablePrimitives = 16;
  static constexpr size_t kPlans = 64;
  // How recently a key that came back must have run to count as recurring:
  // long enough for the shapes of four or five length buckets drawn at
  // random to come back (a bucket drawn one step in ten does so within 16
  // steps four times in five), short enough that shapes a run no longer
  // meets stop holding primitives soon after.
  static constexpr int64_t kRecurrenceSteps = 16;
  // glibc's M_MMAP_THRESHOLD, fixed by the constructor for the whole
  // process: blocks of at least this many bytes are mapped on their own and
  // unmapped when freed (the constructor says why).
  static constexpr int kMallocMmapThreshold = 1 << 20;

  // Sets oneDNN's primitive cache to 0 and kMallocMmapThreshold, both
  // process-wide.
  GemmPlans();
  GemmPlans(const GemmPlans&) = delete;
  GemmPlans& operator=(const GemmPlans&) = delete;

  // The plan for `key`, marked most recently used. The reference stays valid
  // until kPlans other keys have been asked for (the front asks for a plan
  // and executes it before it asks for the next).
  GemmPlan& get(const GemmKey& key);
  // The scratchpad a cpu gemm of `key` allocates (0: none), from the same
  // cached descriptor cpu executes.
  uint64_t scratchpad_bytes(const GemmKey& key) { return get(key).scratchpad_bytes; }
  // The executable primitive of a kNative / kWidened plan (and its
  // tail_primitive, when it has a tail_descriptor): made on first use or
  // after eviction, and marked most recent. The reference is valid until the
  // next call of primitive().
  const dnnl::matmul& primitive(GemmPlan& plan);
  // The training step the next primitive() calls belong to (the allocator's,
  // Allocator::step()). A new step sets capacity() from the kept plans'
  // last executions (the class comment); the same step again changes
  // nothing.
  void at_step(int64_t step);
  const dnnl::engine& engine() const { return engine_; }
  size_t size() const { return plans_.size(); }  // <= kPlans
  // Plans holding an executable primitive now (<= capacity()).
  size_t executable() const { return recent_.size(); }
  // Executable primitives kept at most now, in [kExecutablePrimitives, kPlans].
  size_t capacity() const { return capacity_; }
  // Executable primitives made so far (JIT-compiled: milliseconds each).
  uint64_t primitives_made() const { return made_; }

 private:
  dnnl::engine engine_;
  size_t capacity_ = kExecutablePrimitives;
  int64_t step_ = GemmPlan::kNoStep;
  uint64_t made_ = 0;
  std::map<GemmKey, GemmPlan> plans_;
  std::list<GemmKey> recent_;  // keys of plans with a primitive, most recent first
  std::list<GemmKey> used_;    // keys of all plans, most recently used first
};

// The fp32 copies of shared gemm operands (Backend::share_gemm_operand) on
// the kWidened route: a shared operand's copy is allocated (tag
// gemm.shared_fp32) and widened by the first kWidened gemm that reads it
// and held, for every later one to read as it is, until unshared.
//
// Why: on a CPU without a native bf16 matmul every bf16 gemm widens both
// operands, and a training step reads many operands twice or more: a
// projection's dy in its dX and its dW gemm, a norm's output in the q, k
// and v (or gate and up) projections, the loss head's weight in every chunk.
// Widening was 7.5% of the tiny preset's bf16 step on the `avx2` build
// (bench/RESULTS.md); sharing takes about a fifth of it away. The copy is
// held no longer than the gemms that read it need: callers share where an
// operand's gemms follow one another with little between them.
class SharedGemmOperands {
 public:
  void share(const Tensor& operand);
  // Drops the innermost share of `operand` (and its copy, once no scratch
  // holds it any more).
  void unshare(const Tensor& operand);
  // x's fp32 copy for one kWidened call: a shared one (ready: it already
  // holds x's values, widened by an earlier call), or a new one tagged
  // `tag` (not ready: the call widens it), recorded as the share's copy
  // when x is shared.
  Tensor fp32_copy(const Backend& backend, const Tensor& x, std::string_view tag, bool& ready);
  // Whether x's bytes overlap a shared operand's: a gemm writing such an x
  // would leave that operand's copy stale (a shared operand is read-only
  // until unshared).
  bool overlaps_a_shared_operand(const Tensor& x) const;
  size_t size() const { return shared_.size(); }

 private:
  struct Shared {
    Tensor operand;
    Tensor fp32;  // undefined until a kWidened gemm reads the operand
  };
  std::vector<Shared> shared_;
};

// The host-cpu rule: per call, the widened copies (kWidened) and oneDNN's
// scratchpad, in GemmScratch's declaration order. The cpu kernel table
// executes the plans of the same object (plans()).
class HostCpuGemmWorkspace final : public GemmWorkspace {
 public:
  GemmScratch allocate(const Backend& backend, const GemmKey& key, const Tensor& a, const Tensor& b,
                       const Tensor& c) override;
  void share(const Tensor& operand) override { shared_.share(operand); }
  void unshare(const Tensor& operand) override { shared_.unshare(operand); }
  GemmPlans& plans() { return plans_; }

 private:
  GemmPlans plans_;
  SharedGemmOperands shared_;
};

// What HostCpuGemmWorkspace allocates for one call of `plan`; `shared`
// supplies the copies of shared operands. A and B that are one tensor get
// one copy (b_fp32 is a_fp32, ready once the kernel widened A). Throws
// InternalError, on every route, when C overlaps a shared operand.
GemmScratch allocate_gemm_scratch(const Backend& backend, GemmPlan& plan, const Tensor& a,
                                  const Tensor& b, const Tensor& c, SharedGemmOperands& shared);

}  // namespace headroom
