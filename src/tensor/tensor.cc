#include "tensor/tensor.h"

#include <array>

#include "util/error.h"

namespace headroom {

std::string_view name_of(BackendKind kind) {
  static constexpr std::array<std::string_view, 3> kNames = {"cpu", "meta", "cuda"};
  return kNames[static_cast<int>(kind)];
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor Tensor::empty(Allocator& allocator, BackendKind backend, const Shape& shape, DType dtype,
                     Category category, std::string_view tag) {
  for (int64_t d : shape)
    HR_CHECK(d >= 0, std::string(tag) + ": negative dimension in " + shape_to_string(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.backend_ = backend;
  t.category_ = category;
  t.tag_ = std::string(tag);
  std::string description = std::string(name_of(dtype)) + " " + shape_to_string(shape);
  Allocation a = allocator.allocate(t.nbytes(), category, tag, description);
  t.storage_ = std::make_shared<Storage>(allocator, a);
  return t;
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  HR_CHECK(d >= 0 && d < n, tag_ + ": dim " + std::to_string(d) + " of " + describe());
  return shape_[static_cast<size_t>(d)];
}

std::string Tensor::describe() const {
  return std::string(name_of(dtype_)) + " " + shape_to_string(shape_);
}

void* Tensor::raw() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->address()) + offset_bytes_;
}

namespace {
template <typename T>
constexpr DType dtype_for();
template <>
constexpr DType dtype_for<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_for<bf16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_for<f16>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_for<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_for<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_for<uint8_t>() {
  return DType::kU8;
}
}  // namespace

template <typename T>
T* Tensor::data() const {
  HR_CHECK(dtype_ == dtype_for<T>(),
           tag_ + ": data<" + std::string(name_of(dtype_for<T>())) + ">() on " + describe());
  HR_CHECK(backend_ != BackendKind::kMeta, tag_ + ": data() on a meta tensor");
  return static_cast<T*>(raw());
}
template float* Tensor::data<float>() const;
template bf16* Tensor::data<bf16>() const;
template f16* Tensor::data<f16>() const;
template int32_t* Tensor::data<int32_t>() const;
template int64_t* Tensor::data<int64_t>() const;
template uint8_t* Tensor::data<uint8_t>() const;

Tensor Tensor::view(const Shape& shape) const {
  HR_CHECK(numel_of(shape) == numel(),
           tag_ + ": view " + shape_to_string(shape) + " of " + describe());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  HR_CHECK(dim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
           tag_ + ": rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
               describe());
  Tensor t = *this;
  int64_t row_elems = numel() / (shape_[0] == 0 ? 1 : shape_[0]);
  t.offset_bytes_ += static_cast<uint64_t>(begin * row_elems) * size_of(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

}  // namespace headroom
