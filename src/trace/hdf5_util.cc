#include "trace/hdf5_util.h"

#include <cstdlib>
#include <vector>

#include "util/error.h"

namespace headroom::trace_detail {

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

}  // namespace

std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &reason);
  return reason.empty() ? std::string("no HDF5 detail") : reason;
}

void fail(FailAs as, const std::string& path, const std::string& what) {
  std::string message = path + ": " + what + ": " + hdf5_reason();
  H5Eclear2(H5E_DEFAULT);
  if (as == FailAs::kUsage) throw UsageError(message);
  throw InternalError(message);
}

Hid utf8_string_type() {
  Hid type(H5Tcopy(H5T_C_S1));
  if (!type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail(FailAs::kInternal, "(hdf5)", "cannot make a UTF-8 string type");
  return type;
}

void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path) {
  Hid type = utf8_string_type();
  Hid space(check(H5Screate(H5S_SCALAR), FailAs::kInternal, path, "H5Screate"));
  Hid attr(check(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 FailAs::kInternal, path, std::string("cannot create attribute ") + name));
  const char* text = value.c_str();
  check(H5Awrite(attr.get(), type.get(), &text), FailAs::kInternal, path,
        std::string("cannot write attribute ") + name);
}

void write_scalar_attribute(hid_t object, const char* name, hid_t mem_type, const void* value,
                            const std::string& path) {
  Hid space(check(H5Screate(H5S_SCALAR), FailAs::kInternal, path, "H5Screate"));
  Hid attr(check(H5Acreate2(object, name, mem_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 FailAs::kInternal, path, std::string("cannot create attribute ") + name));
  check(H5Awrite(attr.get(), mem_type, value), FailAs::kInternal, path,
        std::string("cannot write attribute ") + name);
}

bool has_attribute(hid_t object, const char* name) {
  return H5Aexists(object, name) > 0;
}

std::string read_string_attribute(hid_t object, const char* name, const std::string& path) {
  const std::string what = std::string("cannot read string attribute ") + name;
  Hid attr(check(H5Aopen(object, name, H5P_DEFAULT), FailAs::kUsage, path, what));
  Hid file_type(check(H5Aget_type(attr.get()), FailAs::kUsage, path, what));
  if (H5Tget_class(file_type.get()) != H5T_STRING)
    throw UsageError(path + ": attribute " + name + " is not a string");
  if (H5Tis_variable_str(file_type.get()) > 0) {
    Hid mem_type = utf8_string_type();
    char* text = nullptr;
    check(H5Aread(attr.get(), mem_type.get(), &text), FailAs::kUsage, path, what);
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  size_t size = H5Tget_size(file_type.get());
  Hid mem_type(H5Tcopy(H5T_C_S1));
  H5Tset_size(mem_type.get(), size + 1);  // room for the terminator HDF5 adds
  std::vector<char> buffer(size + 1, '\0');
  check(H5Aread(attr.get(), mem_type.get(), buffer.data()), FailAs::kUsage, path, what);
  return std::string(buffer.data());
}

void read_scalar_attribute(hid_t object, const char* name, hid_t mem_type, void* value,
                           const std::string& path) {
  const std::string what = std::string("cannot read attribute ") + name;
  Hid attr(check(H5Aopen(object, name, H5P_DEFAULT), FailAs::kUsage, path, what));
  check(H5Aread(attr.get(), mem_type, value), FailAs::kUsage, path, what);
}

Hid create_table(hid_t parent, const char* name, hid_t file_type, hsize_t chunk_rows,
                 const std::string& path) {
  const std::string what = std::string("cannot create table ") + name;
  hsize_t dims[1] = {0};
  hsize_t max_dims[1] = {H5S_UNLIMITED};
  Hid space(check(H5Screate_simple(1, dims, max_dims), FailAs::kInternal, path, what));
  Hid create(check(H5Pcreate(H5P_DATASET_CREATE), FailAs::kInternal, path, what));
  check(H5Pset_chunk(create.get(), 1, &chunk_rows), FailAs::kInternal, path, what);
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
  // Keep a few chunks cached so the partly filled last chunk is not re-read
  // from disk on every flush.
  Hid access(check(H5Pcreate(H5P_DATASET_ACCESS), FailAs::kInternal, path, what));
  check(H5Pset_chunk_cache(access.get(), 521, 8 << 20, 1.0), FailAs::kInternal, path, what);
  return Hid(check(
      H5Dcreate2(parent, name, file_type, space.get(), H5P_DEFAULT, create.get(), access.get()),
      FailAs::kInternal, path, what));
}

void append_rows(hid_t dataset, hid_t mem_type, const void* rows, hsize_t old_rows, hsize_t count,
                 const std::string& path, const char* table) {
  if (count == 0) return;
  const std::string what = std::string("cannot append to ") + table;
  hsize_t new_size[1] = {old_rows + count};
  check(H5Dset_extent(dataset, new_size), FailAs::kInternal, path, what);
  Hid file_space(check(H5Dget_space(dataset), FailAs::kInternal, path, what));
  hsize_t start[1] = {old_rows};
  hsize_t counts[1] = {count};
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, counts, nullptr),
        FailAs::kInternal, path, what);
  Hid mem_space(check(H5Screate_simple(1, counts, nullptr), FailAs::kInternal, path, what));
  check(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, rows),
        FailAs::kInternal, path, what);
}

hsize_t num_rows(hid_t dataset, const std::string& path, const char* table) {
  const std::string what = std::string("cannot read the shape of ") + table;
  Hid space(check(H5Dget_space(dataset), FailAs::kUsage, path, what));
  if (H5Sget_simple_extent_ndims(space.get()) != 1)
    throw UsageError(path + ": " + table + " is not a 1-D table");
  hsize_t dims[1] = {0};
  check(H5Sget_simple_extent_dims(space.get(), dims, nullptr), FailAs::kUsage, path, what);
  return dims[0];
}

void read_rows(hid_t dataset, hid_t mem_type, void* rows, hsize_t start, hsize_t count,
               const std::string& path, const char* table) {
  if (count == 0) return;
  const std::string what = std::string("cannot read ") + table;
  Hid file_space(check(H5Dget_space(dataset), FailAs::kUsage, path, what));
  hsize_t starts[1] = {start};
  hsize_t counts[1] = {count};
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, starts, nullptr, counts, nullptr),
        FailAs::kUsage, path, what);
  Hid mem_space(check(H5Screate_simple(1, counts, nullptr), FailAs::kUsage, path, what));
  check(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, rows),
        FailAs::kUsage, path, what);
}

}  // namespace headroom::trace_detail
