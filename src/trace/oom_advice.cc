#include "trace/oom_advice.h"

#include <hdf5.h>

#include "trace/schema.h"
#include "util/hdf5/hdf5_handle.h"

namespace headroom {

namespace {

constexpr const char* kAdvice = "/oom/advice";

using hdf5::check_usage;
using hdf5::Hid;

Hid open_file(const std::string& path, unsigned flags) {
  Hid access(check_usage(H5Pcreate(H5P_FILE_ACCESS), path, "cannot open trace file"));
#if H5_VERSION_GE(1, 10, 7)
  // As the writer: no lock, so a live reader (h5py) does not block this.
  check_usage(H5Pset_file_locking(access.get(), false, true), path, "cannot open trace file");
#endif
  return Hid(
      check_usage(H5Fopen(path.c_str(), flags, access.get()), path, "cannot open trace file"));
}

}  // namespace

void write_oom_advice(const std::string& path, const std::string& json) {
  hdf5::QuietHdf5Errors quiet;
  Hid file = open_file(path, H5F_ACC_RDWR);
  if (H5Lexists(file.get(), trace_detail::kOomGroup, H5P_DEFAULT) <= 0)
    hdf5::fail_usage(path, "no /oom postmortem to add advice to");
  // The text, an object header and a B-tree node or two.
  hdf5::reserve_space(file.get(), json.size() + 64 * 1024, path);
  if (H5Lexists(file.get(), kAdvice, H5P_DEFAULT) > 0)
    check_usage(H5Ldelete(file.get(), kAdvice, H5P_DEFAULT), path, "cannot replace /oom/advice");
  Hid type = hdf5::utf8_string_type(path);
  Hid space(check_usage(H5Screate(H5S_SCALAR), path, "cannot write /oom/advice"));
  Hid set(check_usage(H5Dcreate2(file.get(), kAdvice, type.get(), space.get(), H5P_DEFAULT,
                                 H5P_DEFAULT, H5P_DEFAULT),
                      path, "cannot write /oom/advice"));
  const char* text = json.c_str();
  check_usage(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), path,
              "cannot write /oom/advice");
  check_usage(H5Fflush(file.get(), H5F_SCOPE_LOCAL), path, "cannot write /oom/advice");
  hdf5::release_reserved_space(file.get());
}

std::optional<std::string> read_oom_advice(const std::string& path) {
  hdf5::QuietHdf5Errors quiet;
  Hid file = open_file(path, H5F_ACC_RDONLY);
  if (H5Lexists(file.get(), trace_detail::kOomGroup, H5P_DEFAULT) <= 0 ||
      H5Lexists(file.get(), kAdvice, H5P_DEFAULT) <= 0)
    return std::nullopt;
  Hid set(check_usage(H5Dopen2(file.get(), kAdvice, H5P_DEFAULT), path, "cannot read /oom/advice"));
  Hid type = hdf5::utf8_string_type(path);
  char* text = nullptr;
  check_usage(H5Dread(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), path,
              "cannot read /oom/advice");
  std::string out = text ? text : "";
  Hid space(H5Dget_space(set.get()));
  H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, &text);
  return out;
}

}  // namespace headroom
