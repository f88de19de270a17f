// Fuzzing what headroom's HDF5 readers check rather than libhdf5's parser.
//
// Byte-level mutations of an HDF5 file mostly exercise libhdf5 itself, and
// Debian 12's libhdf5 1.10 is not hardened against crafted files: within
// seconds such a fuzzer stops in H5HG_read (a damaged global heap entry of a
// variable-length string: a SEGV, a bad memcpy, a hang in the metadata
// cache), below any code of ours, the class of HDF5's own CVE list. The
// readers' contract is about well-formed HDF5 files with the wrong content:
// a dataset or attribute missing, of another type or shape, with values out
// of range. So the token_dataset and trace targets take a valid file (a
// fixture), copy it, and let the fuzz input rewrite it through libhdf5's own
// writer (rewrite_hdf5): every dataset and attribute, in the order HDF5
// visits them, is kept, has some elements overwritten with input bytes, is
// resized, deleted, or replaced by one of another type and shape. The file
// libhdf5 then parses is well-formed; what it holds is adversarial.
// (docs/testing.md, "Fuzzing", says which bugs this leaves to libhdf5.)
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "util/hdf5/hdf5_handle.h"

namespace headroom::fuzz {

// The fuzz input read front to back as a script of choices; once it is used
// up every choice is 0 (keep) and every byte 0.
class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  // A value in [0, n) from the next bytes (n > 0).
  uint64_t below(uint64_t n) {
    uint64_t v = 0;
    for (uint64_t range = 1; range < n && range != 0; range <<= 8)
      v = (v << 8) | byte();
    return v % n;
  }
  // n bytes (zeros past the input's end).
  std::vector<char> bytes(size_t n) {
    std::vector<char> out(n, 0);
    for (char& c : out)
      c = static_cast<char>(byte());
    return out;
  }
  // Up to `most` characters, as long as the next byte says.
  std::string text(size_t most) {
    const size_t n = below(most + 1);
    std::string out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(static_cast<char>(byte()));
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

namespace rewrite_detail {

using hdf5::Hid;

// Every object's path ("/" first), in HDF5's name order.
inline herr_t collect(hid_t, const char* name, const H5L_info_t* info, void* out) {
  if (info->type == H5L_TYPE_HARD)
    static_cast<std::vector<std::string>*>(out)->push_back(std::string("/") + name);
  return 0;
}

// The types a replacement may have: numbers of every width the readers
// declare or might be handed.
inline hid_t replacement_type(uint64_t choice) {
  switch (choice % 8) {
    case 0:
      return H5T_NATIVE_INT8;
    case 1:
      return H5T_NATIVE_UINT8;
    case 2:
      return H5T_NATIVE_INT16;
    case 3:
      return H5T_NATIVE_INT32;
    case 4:
      return H5T_NATIVE_INT64;
    case 5:
      return H5T_NATIVE_UINT64;
    case 6:
      return H5T_NATIVE_FLOAT;
    default:
      return H5T_NATIVE_DOUBLE;
  }
}

// A space of rank 0-2 with at most 40 elements per dimension.
inline Hid replacement_space(Script& script, hsize_t* count) {
  const int rank = static_cast<int>(script.below(3));
  hsize_t dims[2] = {script.below(41), script.below(41)};
  *count = 1;
  for (int d = 0; d < rank; ++d)
    *count *= dims[d];
  return Hid(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, nullptr));
}

// Whether raw bytes may stand for values of `type`: no pointers inside
// (variable-length strings and sequences, references), members of a
// compound and the base of an array included.
inline bool plain(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_STRING:
      return H5Tis_variable_str(type) == 0;
    case H5T_VLEN:
    case H5T_REFERENCE:
      return false;
    case H5T_COMPOUND: {
      const int members = H5Tget_nmembers(type);
      for (int i = 0; i < members; ++i) {
        Hid member(H5Tget_member_type(type, static_cast<unsigned>(i)));
        if (!member.valid() || !plain(member.get())) return false;
      }
      return members >= 0;
    }
    case H5T_ARRAY: {
      Hid base(H5Tget_super(type));
      return base.valid() && plain(base.get());
    }
    default:
      return true;
  }
}

inline void rewrite_dataset(hid_t file, const std::string& path, Script& script) {
  switch (script.below(10)) {
    case 6: {  // some elements overwritten
      Hid dataset(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
      if (!dataset.valid()) return;
      Hid type(H5Dget_type(dataset.get()));
      Hid space(H5Dget_space(dataset.get()));
      const hssize_t n = H5Sget_simple_extent_npoints(space.get());
      if (!type.valid() || !plain(type.get()) || n <= 0 || n > (1 << 20)) return;
      const size_t size = H5Tget_size(type.get());
      std::vector<char> values(static_cast<size_t>(n) * size);
      if (H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
        return;
      for (uint64_t k = 1 + script.below(4); k > 0; --k) {
        const std::vector<char> value = script.bytes(size);
        std::memcpy(values.data() + script.below(static_cast<uint64_t>(n)) * size, value.data(),
                    size);
      }
      H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      return;
    }
    case 7: {  // resized (an extensible table): shorter, empty or longer
      Hid dataset(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
      if (!dataset.valid()) return;
      Hid space(H5Dget_space(dataset.get()));
      const int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 1 || rank > 4) return;
      hsize_t dims[4], max[4];
      H5Sget_simple_extent_dims(space.get(), dims, max);
      dims[0] = script.below(2 * dims[0] + 3);
      H5Dset_extent(dataset.get(), dims);
      return;
    }
    case 8:  // deleted
      H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      return;
    case 9: {  // replaced by another type and shape
      if (H5Ldelete(file, path.c_str(), H5P_DEFAULT) < 0) return;
      const hid_t type = replacement_type(script.byte());
      hsize_t count = 0;
      Hid space = replacement_space(script, &count);
      Hid dataset(
          H5Dcreate2(file, path.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      if (!dataset.valid()) return;
      const std::vector<char> values = script.bytes(static_cast<size_t>(count) * H5Tget_size(type));
      H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      return;
    }
    default:  // 0-5, kept: most of the time, so one input changes a few things
      return;
  }
}

inline void write_text_attribute(hid_t object, const char* name, const std::string& value) {
  Hid type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Hid space(H5Screate(H5S_SCALAR));
  Hid attribute(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  const char* text = value.c_str();
  if (attribute.valid()) H5Awrite(attribute.get(), type.get(), &text);
}

inline void rewrite_attributes(hid_t file, const std::string& path, Script& script) {
  Hid object(H5Oopen(file, path.c_str(), H5P_DEFAULT));
  if (!object.valid()) return;
  std::vector<std::string> names;
  H5Aiterate2(
      object.get(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
        static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        return 0;
      },
      &names);
  for (const std::string& name : names) {
    switch (script.below(10)) {
      case 7: {  // a new value of its own type
        Hid attribute(H5Aopen(object.get(), name.c_str(), H5P_DEFAULT));
        Hid type(H5Aget_type(attribute.get()));
        Hid space(H5Aget_space(attribute.get()));
        if (!type.valid() || !space.valid()) break;
        if (H5Tis_variable_str(type.get()) > 0 && H5Sget_simple_extent_npoints(space.get()) == 1) {
          const std::string value = script.text(64);
          const char* text = value.c_str();
          H5Awrite(attribute.get(), type.get(), &text);
        } else if (plain(type.get())) {
          const hssize_t count = H5Sget_simple_extent_npoints(space.get());
          if (count <= 0 || count > 4096) break;
          const std::vector<char> value =
              script.bytes(static_cast<size_t>(count) * H5Tget_size(type.get()));
          H5Awrite(attribute.get(), type.get(), value.data());
        }
        break;
      }
      case 8:  // deleted
        H5Adelete(object.get(), name.c_str());
        break;
      case 9: {  // replaced: a string, or numbers of another type and shape
        H5Adelete(object.get(), name.c_str());
        if (script.byte() % 2 == 0) {
          write_text_attribute(object.get(), name.c_str(), script.text(64));
          break;
        }
        const hid_t type = replacement_type(script.byte());
        hsize_t count = 0;
        Hid space = replacement_space(script, &count);
        Hid attribute(
            H5Acreate2(object.get(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
        const std::vector<char> value =
            script.bytes(static_cast<size_t>(count) * H5Tget_size(type));
        if (attribute.valid()) H5Awrite(attribute.get(), type, value.data());
        break;
      }
      default:  // 0-6, kept
        break;
    }
  }
}

}  // namespace rewrite_detail

// Copies the HDF5 file `base` to scratch_dir()/name, rewrites it as `script`
// directs (the header above) and returns the copy's path. HDF5 refusing one
// of the rewrites (a type it cannot convert) leaves that object as it was.
inline std::string rewrite_hdf5(const std::string& base, const std::string& name, Script& script) {
  using namespace rewrite_detail;
  // Read and written rather than std::filesystem::copy_file, whose
  // sendfile gave up with EINTR under libFuzzer's timers (a 25-minute run).
  std::ifstream in(base, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) std::abort();  // the fixture is readable
  const std::string path = write_file(name, bytes);
  const hdf5::QuietHdf5Errors quiet;
  {
    Hid file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    if (!file.valid()) std::abort();  // the fixture is a valid file
    std::vector<std::string> objects = {"/"};
    H5Lvisit(file.get(), H5_INDEX_NAME, H5_ITER_NATIVE, collect, &objects);
    for (const std::string& object : objects) {
      rewrite_attributes(file.get(), object, script);
      if (object == "/") continue;
      Hid probe(H5Dopen2(file.get(), object.c_str(), H5P_DEFAULT));
      const bool dataset = probe.valid();
      probe.reset();
      if (dataset) rewrite_dataset(file.get(), object, script);
    }
  }
  return path;
}

}  // namespace headroom::fuzz
