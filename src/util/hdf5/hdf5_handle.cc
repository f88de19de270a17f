#include "util/hdf5/hdf5_handle.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "util/atomic_file.h"
#include "util/error.h"

namespace headroom::hdf5 {

namespace {

// HDF5 registers H5close() with atexit when it starts, to flush and close
// whatever is still open at exit. Every file of ours is closed by its owner
// (Hid), so that buys nothing, and after a write the disk refused it does
// harm: the failed H5Fclose frees the file but keeps its identifier, and the
// exit handler's second close crashes (SIGSEGV in H5F__close_cb) or gives up
// ("infinite loop closing library"). It must be said before the library's
// first call, hence at static initialization; a constant, not state.
[[maybe_unused]] const bool kNoCloseAtExit = H5dont_atexit() >= 0;

}  // namespace

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
  // Walking downward, the last entry is the deepest cause ("file signature
  // not found"), which is the one a user can act on.
  if (error->desc == nullptr || error->desc[0] == '\0') return 0;
  std::string desc = error->desc;
  // The POSIX driver's "unable to open file: name = ..., errno = 2, error
  // message = 'No such file or directory', flags = ..." says it best in its
  // quoted part; the path is already at the front of our message.
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

herr_t keep_innermost_errno(unsigned /*n*/, const H5E_error2_t* error, void* data) {
  if (error->desc == nullptr) return 0;
  const char* marker = std::strstr(error->desc, "errno = ");
  if (marker != nullptr) *static_cast<int*>(data) = std::atoi(marker + std::strlen("errno = "));
  return 0;
}

// The message for fail_*; clears the stack so that a caught failure does not
// lend its reason to the next one.
std::string failure_message(const std::string& path, const std::string& what) {
  std::string message = path + ": " + what + ": " + hdf5_reason();
  H5Eclear2(H5E_DEFAULT);
  return message;
}

}  // namespace

std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &reason);
  return reason.empty() ? std::string("no HDF5 detail") : reason;
}

int hdf5_errno() {
  int error_number = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost_errno, &error_number);
  return error_number;
}

void fail_usage(const std::string& path, const std::string& what) {
  const int error_number = hdf5_errno();
  if (is_out_of_space(error_number)) {
    H5Eclear2(H5E_DEFAULT);
    throw_file_error(path, what, error_number);
  }
  throw UsageError(failure_message(path, what));
}

void fail_internal(const std::string& path, const std::string& what) {
  const int error_number = hdf5_errno();
  if (is_out_of_space(error_number)) {
    H5Eclear2(H5E_DEFAULT);
    throw_file_error(path, what, error_number);
  }
  throw InternalError(failure_message(path, what));
}

// ---- room to write ----------------------------------------------------------

namespace {

// The POSIX descriptor under `file` (sec2 driver), or -1.
int descriptor_of(hid_t file) {
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  return *static_cast<int*>(handle);
}

}  // namespace

void reserve_space(hid_t file, uint64_t bytes, const std::string& path) {
  const int fd = descriptor_of(file);
  if (fd < 0) fail_internal(path, "cannot find the file's descriptor to reserve space");
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_file_error(path, "cannot stat", errno);
  const uint64_t end = static_cast<uint64_t>(st.st_size);
  // Preallocation does not count against RLIMIT_FSIZE (only a size change
  // does), so check it as write() would: EFBIG.
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      end + bytes > static_cast<uint64_t>(limit.rlim_cur))
    throw_file_error(path, "cannot write", EFBIG);
  if (bytes == 0) return;
  int result = 0;
  do {
    result =
        ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(end), static_cast<off_t>(bytes));
  } while (result != 0 && errno == EINTR);
  if (result == 0) return;
  const int error_number = errno;
  if (error_number != EOPNOTSUPP && error_number != ENOSYS)
    throw_file_error(path, "cannot write", error_number);
  struct statvfs fs {};
  if (::fstatvfs(fd, &fs) == 0 &&
      static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize) < bytes)
    throw_file_error(path, "cannot write", ENOSPC);
}

void release_reserved_space(hid_t file) noexcept {
  const int fd = descriptor_of(file);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) return;
  // Everything past the end. tmpfs frees it on a punched hole; ext4 and xfs
  // ignore holes past the end but free preallocated blocks on a truncate,
  // even to the same size.
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size,
                  std::numeric_limits<off_t>::max() - st.st_size) != 0) {
    // Not supported here: the truncate below is the other way.
  }
  if (::ftruncate(fd, st.st_size) != 0) {
    // Nothing lost: the blocks stay allocated until the file is removed.
  }
}

void detach_from_disk(hid_t file) noexcept {
  const int fd = descriptor_of(file);
  if (fd < 0) return;
  const int sink = ::memfd_create("headroom-detached-hdf5", MFD_CLOEXEC);
  if (sink < 0) return;
  // The same size, so the driver's idea of the end of file still holds.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && ::ftruncate(sink, st.st_size) == 0) ::dup2(sink, fd);
  ::close(sink);
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

Hid utf8_string_type(const std::string& path) {
  Hid type(H5Tcopy(H5T_C_S1));
  if (!type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail_internal(path, "cannot make a UTF-8 string type");
  return type;
}

// ---- attributes -------------------------------------------------------------

void write_scalar_attribute(hid_t object, const char* name, hid_t mem_type, const void* value,
                            const std::string& path) {
  const std::string what = std::string("cannot write attribute ") + name;
  if (H5Aexists(object, name) > 0) check_internal(H5Adelete(object, name), path, what);
  Hid space(check_internal(H5Screate(H5S_SCALAR), path, what));
  Hid attr(check_internal(H5Acreate2(object, name, mem_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                          path, what));
  check_internal(H5Awrite(attr.get(), mem_type, value), path, what);
}

void write_int64_attribute(hid_t object, const char* name, int64_t value, const std::string& path) {
  write_scalar_attribute(object, name, H5T_NATIVE_INT64, &value, path);
}

void write_double_attribute(hid_t object, const char* name, double value, const std::string& path) {
  write_scalar_attribute(object, name, H5T_NATIVE_DOUBLE, &value, path);
}

void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path) {
  Hid type = utf8_string_type(path);
  const char* text = value.c_str();
  write_scalar_attribute(object, name, type.get(), &text, path);
}

bool has_attribute(hid_t object, const char* name) {
  return H5Aexists(object, name) > 0;
}

namespace {

// Which classes of stored value a typed reader accepts, and how its error
// names them; kAnyClass leaves the conversion to HDF5.
struct Accepted {
  H5T_class_t one;
  H5T_class_t other;
  const char* expected;  // nullptr: any class
};
constexpr Accepted kAnyClass{H5T_NO_CLASS, H5T_NO_CLASS, nullptr};

// Opens attribute `name` if present and checks that it holds exactly one
// value (reading more into one would overrun the caller's variable), of an
// accepted class.
std::optional<Hid> open_scalar_attribute(hid_t object, const char* name, const std::string& path,
                                         const Accepted& accepted) {
  const htri_t exists = H5Aexists(object, name);
  if (exists < 0) fail_usage(path, std::string("cannot look up attribute ") + name);
  if (exists == 0) return std::nullopt;
  const std::string what = std::string("cannot read attribute ") + name;
  Hid attr(check_usage(H5Aopen(object, name, H5P_DEFAULT), path, what));
  Hid type(check_usage(H5Aget_type(attr.get()), path, what));
  const H5T_class_t type_class = H5Tget_class(type.get());
  if (accepted.expected != nullptr && type_class != accepted.one && type_class != accepted.other)
    throw UsageError(path + ": attribute " + name + " has dtype " + describe_type(type.get()) +
                     "; expected " + accepted.expected);
  Hid space(check_usage(H5Aget_space(attr.get()), path, what));
  const hssize_t values = H5Sget_simple_extent_npoints(space.get());
  if (values != 1)
    throw UsageError(path + ": attribute " + name + " holds " + std::to_string(values) +
                     " values; expected one");
  return attr;
}

bool read_one(hid_t object, const char* name, hid_t mem_type, void* value, const std::string& path,
              const Accepted& accepted) {
  std::optional<Hid> attr = open_scalar_attribute(object, name, path, accepted);
  if (!attr) return false;
  check_usage(H5Aread(attr->get(), mem_type, value), path,
              std::string("cannot read attribute ") + name);
  return true;
}

}  // namespace

bool read_scalar_attribute(hid_t object, const char* name, hid_t mem_type, void* value,
                           const std::string& path) {
  return read_one(object, name, mem_type, value, path, kAnyClass);
}

std::optional<int64_t> read_int64_attribute(hid_t object, const char* name,
                                            const std::string& path) {
  int64_t value = 0;
  if (!read_one(object, name, H5T_NATIVE_INT64, &value, path,
                {H5T_INTEGER, H5T_INTEGER, "an integer"}))
    return std::nullopt;
  return value;
}

std::optional<double> read_double_attribute(hid_t object, const char* name,
                                            const std::string& path) {
  double value = 0.0;
  if (!read_one(object, name, H5T_NATIVE_DOUBLE, &value, path,
                {H5T_FLOAT, H5T_INTEGER, "a number"}))
    return std::nullopt;
  return value;
}

std::optional<std::string> read_string_attribute(hid_t object, const char* name,
                                                 const std::string& path) {
  std::optional<Hid> attr =
      open_scalar_attribute(object, name, path, {H5T_STRING, H5T_STRING, "a string"});
  if (!attr) return std::nullopt;
  const std::string what = std::string("cannot read attribute ") + name;
  Hid file_type(check_usage(H5Aget_type(attr->get()), path, what));
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

// ---- 1-D tables -------------------------------------------------------------

Hid create_table(hid_t parent, const char* name, hid_t file_type, hsize_t chunk_rows,
                 const std::string& path) {
  const std::string what = std::string("cannot create table ") + name;
  hsize_t dims[1] = {0};
  hsize_t max_dims[1] = {H5S_UNLIMITED};
  Hid space(check_internal(H5Screate_simple(1, dims, max_dims), path, what));
  Hid create(check_internal(H5Pcreate(H5P_DATASET_CREATE), path, what));
  check_internal(H5Pset_chunk(create.get(), 1, &chunk_rows), path, what);
  // No filters, on purpose. The partly filled last chunk is rewritten at
  // every flush; compressed, its size changes, so HDF5 frees its old place
  // and allocates a new one, and the same flush may hand the freed bytes to
  // the next chunk. A kill mid-flush then leaves the on-disk index pointing
  // at overwritten bytes. Measured by killing a flush-only writer at random
  // moments: gzip gave 22/200 unreadable files; gzip with raw partial chunks
  // (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) 4/150 files with wrong event rows;
  // with no filter a chunk never moves and 0/250 were unreadable or wrong.
  // Finished traces can be compressed offline (docs/trace.md, h5repack).
  //
  // Cache exactly one chunk: the partly filled last one, so it is not re-read
  // from disk on every flush. Appends never revisit a full chunk, and a larger
  // cache only fills with them: at 8 MiB per table it held ~8 MiB of old
  // event chunks in a 150-step quickstart, memory outside the allocator that
  // the resident-set check counted against the plan.
  const size_t chunk_bytes = static_cast<size_t>(chunk_rows) * H5Tget_size(file_type);
  Hid access(check_internal(H5Pcreate(H5P_DATASET_ACCESS), path, what));
  check_internal(H5Pset_chunk_cache(access.get(), 7, chunk_bytes, 1.0), path, what);
  return Hid(check_internal(
      H5Dcreate2(parent, name, file_type, space.get(), H5P_DEFAULT, create.get(), access.get()),
      path, what));
}

namespace {

// A transfer property list whose type-conversion buffer holds `count` rows
// (at most HDF5's default 1 MiB, at least 4 KiB). With the default list
// HDF5 callocs the whole default-sized buffer for every H5Dwrite / H5Dread
// that converts (native struct <-> packed file compound: all of the trace's
// tables), and a background buffer as large again: 1-2 MiB zeroed per call,
// ~2% of a tiny model's training step (memset under H5FL_blk_calloc in
// `perf`), for the handful of rows a step appends. Reads use it too.
Hid transfer_for_rows(hid_t dataset, hid_t mem_type, hsize_t count, const std::string& path,
                      const std::string& what) {
  constexpr size_t kDefaultBuffer = 1 << 20;  // H5D_TEMP_BUF_SIZE
  constexpr size_t kSmallest = 4096;
  Hid file_type(check_internal(H5Dget_type(dataset), path, what));
  // Twice the larger of the two row sizes: a variable-length string member
  // is 8 bytes in either type as H5Tget_size counts it, but its conversion
  // goes through a larger disk form, and HDF5 refuses a buffer that cannot
  // hold one row of that.
  const size_t row = 2 * std::max(H5Tget_size(mem_type), H5Tget_size(file_type.get()));
  const size_t bytes =
      std::min(kDefaultBuffer, std::max(kSmallest, row * static_cast<size_t>(count)));
  Hid transfer(check_internal(H5Pcreate(H5P_DATASET_XFER), path, what));
  check_internal(H5Pset_buffer(transfer.get(), bytes, nullptr, nullptr), path, what);
  return transfer;
}

}  // namespace

void append_rows(hid_t dataset, hid_t mem_type, const void* rows, hsize_t old_rows, hsize_t count,
                 const std::string& path, const char* table) {
  if (count == 0) return;
  const std::string what = std::string("cannot append to ") + table;
  hsize_t new_size[1] = {old_rows + count};
  check_internal(H5Dset_extent(dataset, new_size), path, what);
  Hid file_space(check_internal(H5Dget_space(dataset), path, what));
  hsize_t start[1] = {old_rows};
  hsize_t counts[1] = {count};
  check_internal(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, counts, nullptr), path,
      what);
  Hid mem_space(check_internal(H5Screate_simple(1, counts, nullptr), path, what));
  Hid transfer = transfer_for_rows(dataset, mem_type, count, path, what);
  check_internal(
      H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), transfer.get(), rows), path,
      what);
}

hsize_t num_rows(hid_t dataset, const std::string& path, const char* table) {
  const std::string what = std::string("cannot read the shape of ") + table;
  Hid space(check_usage(H5Dget_space(dataset), path, what));
  if (H5Sget_simple_extent_ndims(space.get()) != 1)
    throw UsageError(path + ": " + table + " is not a 1-D table");
  hsize_t dims[1] = {0};
  check_usage(H5Sget_simple_extent_dims(space.get(), dims, nullptr), path, what);
  return dims[0];
}

void read_rows(hid_t dataset, hid_t mem_type, void* rows, hsize_t start, hsize_t count,
               const std::string& path, const char* table) {
  if (count == 0) return;
  const std::string what = std::string("cannot read ") + table;
  Hid file_space(check_usage(H5Dget_space(dataset), path, what));
  hsize_t starts[1] = {start};
  hsize_t counts[1] = {count};
  check_usage(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, starts, nullptr, counts, nullptr), path,
      what);
  Hid mem_space(check_usage(H5Screate_simple(1, counts, nullptr), path, what));
  Hid transfer = transfer_for_rows(dataset, mem_type, count, path, what);
  check_usage(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), transfer.get(), rows),
              path, what);
}

}  // namespace headroom::hdf5
