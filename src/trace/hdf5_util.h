// Internal to src/trace: owning HDF5 handles, errors that carry HDF5's own
// reason, and the few generic table/attribute operations the trace uses.
// Nothing outside src/trace includes this (hdf5.h stays out of public headers).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>

namespace headroom::trace_detail {

// An hid_t that closes itself. The closer is chosen by the identifier's type
// (H5Iget_type), so one class serves files, groups, datasets, types, spaces,
// attributes and property lists.
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
  // Closes now; returns false when HDF5 reported a failure (e.g. a file whose
  // final write failed), so close() paths can surface it.
  bool reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// While alive, HDF5 does not print its error stack to stderr: failures become
// exceptions whose message carries hdf5_reason() instead. Restores the
// previous handler (h5py-style embedding or a user's HDF5_DEBUG setup).
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

// The innermost description on the current HDF5 error stack, e.g.
// "file signature not found"; "no HDF5 detail" when the stack is empty.
std::string hdf5_reason();

// How a failure is reported: creating/opening is the user's path (UsageError,
// exit code 2); a failed write mid-run is a system failure (InternalError).
enum class FailAs { kUsage, kInternal };

// Throws "<path>: <what>: <hdf5_reason()>" as the chosen error type.
[[noreturn]] void fail(FailAs as, const std::string& path, const std::string& what);

// Checks an HDF5 return value (hid_t or herr_t; negative = failure).
inline hid_t check(hid_t result, FailAs as, const std::string& path, const std::string& what) {
  if (result < 0) fail(as, path, what);
  return result;
}

// A variable-length UTF-8 string type: what h5py reads back as `str`.
Hid utf8_string_type();

// Scalar attributes. Strings are variable-length UTF-8.
void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path);
void write_scalar_attribute(hid_t object, const char* name, hid_t mem_type, const void* value,
                            const std::string& path);
bool has_attribute(hid_t object, const char* name);
// Reads variable- or fixed-length string attributes (files written by other
// tools may use either).
std::string read_string_attribute(hid_t object, const char* name, const std::string& path);
void read_scalar_attribute(hid_t object, const char* name, hid_t mem_type, void* value,
                           const std::string& path);

// An empty 1-D table of `file_type` rows, extendable without limit, chunked
// by `chunk_rows`, unfiltered: a chunk, once allocated, never moves, which
// is what keeps a file consistent when a kill lands mid-flush (see the .cc).
Hid create_table(hid_t parent, const char* name, hid_t file_type, hsize_t chunk_rows,
                 const std::string& path);
// Extends the table by `count` rows and writes them from `rows` (laid out as
// `mem_type`). HDF5 converts memory layout to file layout by member name.
void append_rows(hid_t dataset, hid_t mem_type, const void* rows, hsize_t old_rows, hsize_t count,
                 const std::string& path, const char* table);
hsize_t num_rows(hid_t dataset, const std::string& path, const char* table);
// Reads rows [start, start + count) into `rows` laid out as `mem_type`.
void read_rows(hid_t dataset, hid_t mem_type, void* rows, hsize_t start, hsize_t count,
               const std::string& path, const char* table);

}  // namespace headroom::trace_detail
