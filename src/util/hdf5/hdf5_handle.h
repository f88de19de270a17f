// Owning HDF5 handles, errors that carry HDF5's own reason, and the generic
// attribute and 1-D table operations that the token dataset (src/data) and
// the trace (src/trace) both need.
//
// It is its own library, headroom_hdf5, on top of util alone: data sits on
// util and trace on memory in DESIGN.md's layer table, so neither could link
// helpers kept in the other, while util itself stays free of HDF5. Only .cc
// files (and headers that are themselves internal to a library's .cc files,
// like trace/schema.h) include this, so hdf5.h stays out of every public
// header.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace headroom::hdf5 {

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

// The innermost description on the current HDF5 error stack ("file signature
// not found", "No such file or directory"); "no HDF5 detail" when the stack is
// empty.
std::string hdf5_reason();

// The errno of the innermost POSIX call on the current HDF5 error stack (its
// file driver says "errno = 28, error message = '...'"), 0 when none did.
int hdf5_errno();

// Both throw "<path>: <what>: <hdf5_reason()>" and clear HDF5's error stack.
// Reading or creating a user's file is the user's problem: UsageError (exit
// code 2). A write to a file we already opened failing mid-run is a system
// failure: InternalError — except when the stack says the disk is full
// (is_out_of_space(hdf5_errno()): ENOSPC, EDQUOT, EFBIG), which is where the
// user chose to write: UsageError "<path>: <what>: No space left on device
// (disk full)".
[[noreturn]] void fail_usage(const std::string& path, const std::string& what);
[[noreturn]] void fail_internal(const std::string& path, const std::string& what);

// ---- room to write ----------------------------------------------------------
// HDF5 cannot undo a flush that failed halfway: with the disk full, some of
// its writes land (metadata rewritten in place) and some do not (new chunks
// past the end), and the file may no longer open. So a writer that must keep
// its file readable asks for room before it writes: reserve_space() makes
// sure `bytes` past the file's current end can be written, or throws before
// HDF5 has changed anything.
//
// It preallocates the range (fallocate with FALLOC_FL_KEEP_SIZE: the file's
// size and content do not change, but its blocks exist, so HDF5's writes into
// them cannot fail for space) and checks RLIMIT_FSIZE, which preallocation
// does not. Where the filesystem cannot preallocate (EOPNOTSUPP: some NFS,
// ZFS), it compares with the free space instead (statvfs), which another
// writer can race. Throws UsageError "<path>: cannot write: No space left on
// device (disk full)". `file` must use HDF5's default (sec2) driver.
void reserve_space(hid_t file, uint64_t bytes, const std::string& path);
// Gives back what reserve_space() preallocated and HDF5 did not use (blocks
// past the file's end would otherwise stay allocated on tmpfs until the file
// is removed). Best effort, never throws.
void release_reserved_space(hid_t file) noexcept;

// After a write to `file` failed, sends every later write of the library to
// memory instead of the disk (the file descriptor is replaced by an
// anonymous in-memory file), so closing the file and the library's own
// shutdown succeed instead of retrying the failed writes forever ("infinite
// loop closing library", a crash in H5_term_library). The file on disk stays
// as the failed write left it. Best effort, never throws.
void detach_from_disk(hid_t file) noexcept;

// Check an HDF5 return value (hid_t or herr_t; negative = failure) and return
// it, so a call and its check read as one expression.
inline hid_t check_usage(hid_t result, const std::string& path, const std::string& what) {
  if (result < 0) fail_usage(path, what);
  return result;
}
inline hid_t check_internal(hid_t result, const std::string& path, const std::string& what) {
  if (result < 0) fail_internal(path, what);
  return result;
}

// "int32", "uint8", "float64", "string", "compound", ...: how a user (numpy,
// h5py) would name a file's dtype in an error message.
std::string describe_type(hid_t type);

// A variable-length UTF-8 string type: what h5py reads back as `str`. Fails
// (InternalError naming `path`) only when the HDF5 library itself is broken.
Hid utf8_string_type(const std::string& path);

// ---- attributes -------------------------------------------------------------

// Writes a scalar attribute, replacing one of the same name; InternalError on
// failure. Strings are variable-length UTF-8, as h5py writes them.
void write_scalar_attribute(hid_t object, const char* name, hid_t mem_type, const void* value,
                            const std::string& path);
void write_int64_attribute(hid_t object, const char* name, int64_t value, const std::string& path);
void write_double_attribute(hid_t object, const char* name, double value, const std::string& path);
void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path);

// True when `object` has attribute `name`; a failed lookup counts as absent.
bool has_attribute(hid_t object, const char* name);

// The readers report an absent attribute (false, nullopt) instead of failing,
// so each caller words "missing" in its own format's terms. A present
// attribute that holds other than one value, or that HDF5 cannot read, is a
// UsageError naming it.
//
// Reads the value converted to `mem_type` (any type HDF5 converts to, an enum
// included) into `value`.
[[nodiscard]] bool read_scalar_attribute(hid_t object, const char* name, hid_t mem_type,
                                         void* value, const std::string& path);
// The typed readers also check the attribute's class and say what they
// expected: an integer; a number (float or integer); a string (fixed- or
// variable-length: numpy 'S' attributes are as common as Python str).
std::optional<int64_t> read_int64_attribute(hid_t object, const char* name,
                                            const std::string& path);
std::optional<double> read_double_attribute(hid_t object, const char* name,
                                            const std::string& path);
std::optional<std::string> read_string_attribute(hid_t object, const char* name,
                                                 const std::string& path);

// ---- 1-D tables -------------------------------------------------------------
// `table` is the dataset's full name ("/memory/events"), used in messages.
// Creating and appending fail as InternalError, reading as UsageError.

// An empty 1-D table of `file_type` rows, extendable without limit, chunked
// by `chunk_rows`, unfiltered: a chunk, once allocated, never moves, which
// is what keeps a file consistent when a kill lands mid-flush (see the .cc).
// Its chunk cache holds one chunk (chunk_rows rows): the writer's memory per
// table is bounded by that, whatever the table's length.
Hid create_table(hid_t parent, const char* name, hid_t file_type, hsize_t chunk_rows,
                 const std::string& path);
// Extends the table by `count` rows and writes them from `rows` (laid out as
// `mem_type`). HDF5 converts memory layout to file layout (by member name for
// compounds).
void append_rows(hid_t dataset, hid_t mem_type, const void* rows, hsize_t old_rows, hsize_t count,
                 const std::string& path, const char* table);
hsize_t num_rows(hid_t dataset, const std::string& path, const char* table);
// Reads rows [start, start + count) into `rows` laid out as `mem_type`.
void read_rows(hid_t dataset, hid_t mem_type, void* rows, hsize_t start, hsize_t count,
               const std::string& path, const char* table);

}  // namespace headroom::hdf5
