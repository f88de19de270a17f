#include "data/hdf5_handle.h"

#include <vector>

#include "util/error.h"

namespace headroom::data_detail {

bool Hid::reset() noexcept {
  if (id_ < 0) return true;
  herr_t status = 0;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      status = H5Fclose(id_);
      break;
    case H5I_GROUP:
      status = H5Gclose(id_);
      break;
    case H5I_DATASET:
      status = H5Dclose(id_);
      break;
    case H5I_DATATYPE:
      status = H5Tclose(id_);
      break;
    case H5I_DATASPACE:
      status = H5Sclose(id_);
      break;
    case H5I_ATTR:
      status = H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      status = H5Pclose(id_);
      break;
    default:
      status = H5Idec_ref(id_);
      break;
  }
  id_ = H5I_INVALID_HID;
  return status >= 0;
}

QuietHdf5Errors::QuietHdf5Errors() {
  H5Eget_auto2(H5E_DEFAULT, &saved_func_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietHdf5Errors::~QuietHdf5Errors() {
  H5Eset_auto2(H5E_DEFAULT, saved_func_, saved_data_);
}

namespace {

herr_t keep_innermost(unsigned /*n*/, const H5E_error2_t* error, void* data) {
  // Walking downward, the last entry is the deepest cause, the one a user can
  // act on. The POSIX driver buries the OS message in "... error message =
  // 'No such file or directory' ..."; keep just that part.
  if (error->desc == nullptr || error->desc[0] == '\0') return 0;
  std::string desc = error->desc;
  const std::string marker = "error message = '";
  size_t start = desc.find(marker);
  if (start != std::string::npos) {
    start += marker.size();
    size_t end = desc.find('\'', start);
    if (end != std::string::npos) desc = desc.substr(start, end - start);
  }
  *static_cast<std::string*>(data) = desc;
  return 0;
}

std::string take_reason() {
  std::string reason = hdf5_reason();
  H5Eclear2(H5E_DEFAULT);
  return reason;
}

}  // namespace

std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &reason);
  return reason.empty() ? std::string("no HDF5 detail") : reason;
}

void fail_usage(const std::string& path, const std::string& what) {
  throw UsageError(path + ": " + what + ": " + take_reason());
}

void fail_internal(const std::string& path, const std::string& what) {
  throw InternalError(path + ": " + what + ": " + take_reason());
}

std::string describe_type(hid_t type) {
  const size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
    case H5T_FLOAT:
      return "float" + std::to_string(bits);
    case H5T_STRING:
      return "string";
    case H5T_ENUM:
      return "enum (h5py writes numpy bool as one)";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length";
    default:
      return "an unsupported HDF5 type";
  }
}

namespace {

Hid utf8_string_type(const std::string& path) {
  Hid type(H5Tcopy(H5T_C_S1));
  if (!type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail_internal(path, "cannot make a UTF-8 string type");
  return type;
}

void write_attribute(hid_t object, const char* name, hid_t type, const void* value,
                     const std::string& path) {
  const std::string what = std::string("cannot write attribute ") + name;
  if (H5Aexists(object, name) > 0) check_internal(H5Adelete(object, name), path, what);
  Hid space(check_internal(H5Screate(H5S_SCALAR), path, what));
  Hid attr(check_internal(H5Acreate2(object, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                          path, what));
  check_internal(H5Awrite(attr.get(), type, value), path, what);
}

// Opens attribute `name` if present and checks it holds exactly one value of
// one of the allowed classes.
std::optional<Hid> open_scalar_attribute(hid_t object, const char* name, const std::string& path,
                                         H5T_class_t allowed, H5T_class_t also_allowed,
                                         const char* expected) {
  const htri_t exists = H5Aexists(object, name);
  if (exists < 0) fail_usage(path, std::string("cannot look up attribute ") + name);
  if (exists == 0) return std::nullopt;
  const std::string what = std::string("cannot read attribute ") + name;
  Hid attr(check_usage(H5Aopen(object, name, H5P_DEFAULT), path, what));
  Hid type(check_usage(H5Aget_type(attr.get()), path, what));
  const H5T_class_t type_class = H5Tget_class(type.get());
  if (type_class != allowed && type_class != also_allowed)
    throw UsageError(path + ": attribute " + name + " has dtype " + describe_type(type.get()) +
                     "; expected " + expected);
  Hid space(check_usage(H5Aget_space(attr.get()), path, what));
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    throw UsageError(path + ": attribute " + name + " holds " +
                     std::to_string(H5Sget_simple_extent_npoints(space.get())) +
                     " values; expected one");
  return attr;
}

}  // namespace

void write_int64_attribute(hid_t object, const char* name, int64_t value, const std::string& path) {
  write_attribute(object, name, H5T_NATIVE_INT64, &value, path);
}

void write_double_attribute(hid_t object, const char* name, double value, const std::string& path) {
  write_attribute(object, name, H5T_NATIVE_DOUBLE, &value, path);
}

void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path) {
  Hid type = utf8_string_type(path);
  const char* text = value.c_str();
  write_attribute(object, name, type.get(), &text, path);
}

std::optional<int64_t> read_int64_attribute(hid_t object, const char* name,
                                            const std::string& path) {
  std::optional<Hid> attr =
      open_scalar_attribute(object, name, path, H5T_INTEGER, H5T_INTEGER, "an integer");
  if (!attr) return std::nullopt;
  int64_t value = 0;
  check_usage(H5Aread(attr->get(), H5T_NATIVE_INT64, &value), path,
              std::string("cannot read attribute ") + name);
  return value;
}

std::optional<double> read_double_attribute(hid_t object, const char* name,
                                            const std::string& path) {
  std::optional<Hid> attr =
      open_scalar_attribute(object, name, path, H5T_FLOAT, H5T_INTEGER, "a number");
  if (!attr) return std::nullopt;
  double value = 0.0;
  check_usage(H5Aread(attr->get(), H5T_NATIVE_DOUBLE, &value), path,
              std::string("cannot read attribute ") + name);
  return value;
}

std::optional<std::string> read_string_attribute(hid_t object, const char* name,
                                                 const std::string& path) {
  std::optional<Hid> attr =
      open_scalar_attribute(object, name, path, H5T_STRING, H5T_STRING, "a string");
  if (!attr) return std::nullopt;
  const std::string what = std::string("cannot read attribute ") + name;
  Hid file_type(check_usage(H5Aget_type(attr->get()), path, what));
  // Other tools write fixed-length strings (numpy 'S' dtype) as often as
  // variable-length ones (Python str); read both.
  if (H5Tis_variable_str(file_type.get()) > 0) {
    Hid mem_type = utf8_string_type(path);
    char* text = nullptr;
    check_usage(H5Aread(attr->get(), mem_type.get(), &text), path, what);
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(file_type.get());
  Hid mem_type(check_usage(H5Tcopy(H5T_C_S1), path, what));
  check_usage(H5Tset_size(mem_type.get(), size + 1), path, what);  // room for the terminator
  std::vector<char> buffer(size + 1, '\0');
  check_usage(H5Aread(attr->get(), mem_type.get(), buffer.data()), path, what);
  return std::string(buffer.data());
}

}  // namespace headroom::data_detail
