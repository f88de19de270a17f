// Internal to src/data: owning HDF5 handles and the handful of attribute and
// type helpers the token dataset needs. Nothing outside src/data includes
// this, so hdf5.h stays out of the public headers.
//
// src/trace has the same kind of helpers (trace/hdf5_util.h), but data sits
// directly on util in DESIGN.md's layer table and trace sits on memory, so
// data cannot link them; the overlap is small and deliberate.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace headroom::data_detail {

// An hid_t that closes itself with the closer its H5Iget_type calls for.
class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : id_(id) {}
  ~Hid() { reset(); }
  Hid(Hid&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Hid& operator=(Hid&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now; false when HDF5 reported a failure (a final flush that failed).
  bool reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// While alive, HDF5 prints nothing to stderr: failures become exceptions whose
// message carries hdf5_reason(). Restores the previous handler on exit.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors();
  ~QuietHdf5Errors();
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t saved_func_ = nullptr;
  void* saved_data_ = nullptr;
};

// The innermost description on HDF5's error stack ("file signature not
// found", "No such file or directory"), or "no HDF5 detail".
std::string hdf5_reason();

// Throws UsageError (reading a user's file) or InternalError (writing our own
// file failed: disk full, permissions) as "<path>: <what>: <hdf5_reason()>".
[[noreturn]] void fail_usage(const std::string& path, const std::string& what);
[[noreturn]] void fail_internal(const std::string& path, const std::string& what);

inline hid_t check_usage(hid_t result, const std::string& path, const std::string& what) {
  if (result < 0) fail_usage(path, what);
  return result;
}
inline hid_t check_internal(hid_t result, const std::string& path, const std::string& what) {
  if (result < 0) fail_internal(path, what);
  return result;
}

// "int32", "uint8", "float64", "string", "compound", ... : how a user (numpy,
// h5py) would name a file's dtype in an error message.
std::string describe_type(hid_t type);

// Writing scalar attributes (strings as variable-length UTF-8, as h5py does).
void write_int64_attribute(hid_t object, const char* name, int64_t value, const std::string& path);
void write_double_attribute(hid_t object, const char* name, double value, const std::string& path);
void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path);

// Reading scalar attributes; nullopt when absent. A present attribute of the
// wrong class (a string where an integer belongs) is a UsageError naming it.
std::optional<int64_t> read_int64_attribute(hid_t object, const char* name,
                                            const std::string& path);
std::optional<double> read_double_attribute(hid_t object, const char* name,
                                            const std::string& path);
std::optional<std::string> read_string_attribute(hid_t object, const char* name,
                                                 const std::string& path);

}  // namespace headroom::data_detail
