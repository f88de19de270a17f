// Backend: the op list, implemented once per device kind.
//
// cpu computes (oneDNN GEMM, OpenMP loops); meta validates shapes and makes
// exactly the allocations cpu makes, in the same order, and computes nothing;
// cuda (built when nvcc is found) calls into the top-level cuda/ kernels.
// The model and trainer see only this interface, so plan and run share one
// code path (DESIGN.md, promise 1).
//
// Contract for every op: shape/dtype errors throw InternalError naming the
// tensors' tags and shapes; an op that returns a new tensor allocates it from
// this backend's allocator under the caller's category and tag; any scratch
// memory an op needs is allocated from the same allocator (category
// workspace) on every backend, so meta accounts for it too.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "memory/allocator.h"
#include "tensor/tensor.h"

namespace headroom {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  Allocator& allocator() const { return *allocator_; }

  // Uninitialized tensor from this backend's allocator.
  Tensor empty(const Shape& shape, DType dtype, Category category, std::string_view tag) const {
    return Tensor::empty(*allocator_, kind(), shape, dtype, category, tag);
  }

  // x[:] = value (floating dtypes; integer dtypes take the value truncated).
  virtual void fill(Tensor& x, float value) = 0;
  // x[:] ~ uniform(lo, hi), deterministic in (seed, index): the same values on
  // every backend and thread count.
  virtual void fill_uniform(Tensor& x, uint64_t seed, float lo, float hi) = 0;
  // dst[:] = src[:]; same shape, same dtype.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  // A new tensor holding x converted to `dtype` (round-to-nearest-even to bf16).
  virtual Tensor cast(const Tensor& x, DType dtype, Category category, std::string_view tag) = 0;
  // out = a + b, elementwise, same shapes and dtype; out may alias a or b.
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // C = alpha * op(A) @ op(B) + beta * C, with op(X) = X or X^T.
  // A, B, C are 2-D; A and B share a dtype (fp32 or bf16); C is fp32 or the
  // same dtype as A. Accumulation is always in fp32. beta = 0 ignores C's
  // contents (they may be uninitialized or NaN).
  virtual void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
                    float alpha, float beta) = 0;

 protected:
  explicit Backend(Allocator& allocator) : allocator_(&allocator) {}

 private:
  Allocator* allocator_;
};

std::unique_ptr<Backend> make_cpu_backend(Allocator& allocator);
std::unique_ptr<Backend> make_meta_backend(Allocator& allocator);

}  // namespace headroom
