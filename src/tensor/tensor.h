// Tensor: a typed, shaped, row-major view of a block the allocator handed out.
//
// The block is held by a shared Storage that gives it back to its allocator
// when the last tensor viewing it goes away, so freeing is never forgotten
// and never doubled. Views (reshape, row ranges) share the storage and copy
// nothing. Tensors are always contiguous: llm.c-style kernels index them flat.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "memory/allocator.h"
#include "tensor/dtype.h"

namespace headroom {

enum class BackendKind : uint8_t { kCpu, kMeta, kCuda };
std::string_view name_of(BackendKind kind);  // "cpu", "meta", "cuda"

using Shape = std::vector<int64_t>;
std::string shape_to_string(const Shape& shape);  // "[1024, 248320]"
int64_t numel_of(const Shape& shape);

// One block from an allocator, returned to it on destruction.
class Storage {
 public:
  Storage(Allocator& allocator, Allocation allocation)
      : allocator_(&allocator), allocation_(allocation) {}
  ~Storage() { allocator_->free(allocation_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* address() const { return allocation_.address; }
  uint64_t bytes() const { return allocation_.bytes; }
  Allocator& allocator() const { return *allocator_; }

 private:
  Allocator* allocator_;
  Allocation allocation_;
};

class Tensor {
 public:
  Tensor() = default;  // an empty handle: defined() is false

  // Allocates numel * size_of(dtype) bytes from `allocator` under category/tag.
  // The memory is uninitialized. Throws OutOfMemory.
  static Tensor empty(Allocator& allocator, BackendKind backend, const Shape& shape, DType dtype,
                      Category category, std::string_view tag);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  BackendKind backend() const { return backend_; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return numel_of(shape_); }
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * size_of(dtype_); }
  const std::string& tag() const { return tag_; }
  Category category() const { return category_; }
  // "fp32 [1024, 248320]"
  std::string describe() const;

  // Raw element pointer (offset applied). On meta it is a virtual address:
  // never dereference it there. data<T>() checks T against dtype().
  void* raw() const;
  template <typename T>
  T* data() const;

  // Same storage, new shape with the same numel.
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along dim 0, sharing storage.
  Tensor rows(int64_t begin, int64_t end) const;
  // Whether both tensors view the same storage.
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

 private:
  std::shared_ptr<Storage> storage_;
  uint64_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
  BackendKind backend_ = BackendKind::kCpu;
  Category category_ = Category::kWorkspace;
  std::string tag_;
};

}  // namespace headroom
