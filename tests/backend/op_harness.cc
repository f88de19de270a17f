#include "op_harness.h"

#include <cstring>

#include "util/error.h"

namespace headroom::backend_test {

std::vector<uint8_t> encode(DType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> bytes(values.size() * size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = bytes.data() + i * size_of(dtype);
    switch (dtype) {
      case DType::kF32: {
        float f = static_cast<float>(values[i]);
        std::memcpy(p, &f, sizeof f);
        break;
      }
      case DType::kBF16: {
        bf16 h = to_bf16(static_cast<float>(values[i]));
        std::memcpy(p, &h, sizeof h);
        break;
      }
      case DType::kF16: {
        f16 h = to_f16(static_cast<float>(values[i]));
        std::memcpy(p, &h, sizeof h);
        break;
      }
      case DType::kI32: {
        auto x = static_cast<int32_t>(values[i]);
        std::memcpy(p, &x, sizeof x);
        break;
      }
      case DType::kI64: {
        auto x = static_cast<int64_t>(values[i]);
        std::memcpy(p, &x, sizeof x);
        break;
      }
      case DType::kU8:
        *p = static_cast<uint8_t>(values[i]);
        break;
    }
  }
  return bytes;
}

std::vector<double> decode(DType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<double> values(bytes.size() / size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t* p = bytes.data() + i * size_of(dtype);
    switch (dtype) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, p, sizeof f);
        values[i] = f;
        break;
      }
      case DType::kBF16: {
        bf16 h;
        std::memcpy(&h, p, sizeof h);
        values[i] = to_float(h);
        break;
      }
      case DType::kF16: {
        f16 h;
        std::memcpy(&h, p, sizeof h);
        values[i] = to_float(h);
        break;
      }
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p, sizeof x);
        values[i] = x;
        break;
      }
      case DType::kI64: {
        int64_t x;
        std::memcpy(&x, p, sizeof x);
        values[i] = static_cast<double>(x);
        break;
      }
      case DType::kU8:
        values[i] = *p;
        break;
    }
  }
  return values;
}

Tensor make_tensor(Backend& be, const Shape& shape, DType dtype, Category category,
                   std::string_view tag, const std::vector<double>& values) {
  Tensor t = be.empty(shape, dtype, category, tag);
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw InternalError("make_tensor: " + std::to_string(values.size()) + " values for '" +
                        std::string(tag) + "' " + t.describe());
  std::vector<uint8_t> bytes = encode(dtype, values);
  be.copy_from_host(bytes.data(), t);
  return t;
}

std::vector<double> fetch(Backend& be, const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  be.copy_to_host(t, bytes.data());
  return decode(t.dtype(), bytes);
}

const Operand& OpRun::operand(std::string_view role) const {
  for (const Operand& o : operands)
    if (o.role == role) return o;
  throw InternalError("op harness: no operand '" + std::string(role) + "'");
}

std::string dtype_name(DType dtype) {
  return std::string(name_of(dtype));
}

std::string number_name(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", std::fabs(x));
  std::string s = x < 0 ? "m" : "";
  for (const char* c = buffer; *c; ++c)
    if (*c != '+') s += *c == '.' ? 'p' : (*c == '-' ? 'm' : *c);
  return s;
}

std::string shape_name(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

}  // namespace headroom::backend_test
