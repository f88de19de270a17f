// Helpers shared by the data tests: a scratch folder, error-message checks,
// and a raw HDF5 writer that can produce every kind of broken token dataset
// (wrong dtypes, bad offsets, missing attributes) that TokenDatasetWriter
// refuses to write.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "test_util/temp_dir.h"
#include "util/error.h"

namespace headroom::testing {

inline void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "\"" << text << "\" lacks \"" << part << "\"";
}

// The UsageError message `action` throws, or a test failure.
inline std::string usage_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UsageError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error was raised";
  return "";
}

// A token dataset of documents with the given lengths, written to
// dir/corpus.h5 by TokenDatasetWriter and opened: token t of document d is
// token(d, t), and its loss mask mask(d, t) when `mask` is given (no mask
// otherwise). `created_by` names the suite in the file's attributes.
inline TokenDataset write_corpus(const TempDir& dir, const std::vector<int64_t>& lengths,
                                 int64_t vocab, const std::string& created_by,
                                 const std::function<int32_t(int64_t, int64_t)>& token,
                                 const std::function<uint8_t(int64_t, int64_t)>& mask = {}) {
  TokenDatasetAttributes attributes;
  attributes.vocab_size = vocab;
  attributes.tokenizer = "test";
  attributes.created_by = created_by;
  const std::string path = dir.file("corpus.h5");
  TokenDatasetWriter writer(path, attributes, static_cast<bool>(mask));
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> masks;
    for (int64_t t = 0; t < lengths[d]; ++t) {
      tokens.push_back(token(static_cast<int64_t>(d), t));
      if (mask) masks.push_back(mask(static_cast<int64_t>(d), t));
    }
    writer.append_document(tokens, std::span<const uint8_t>(masks));
  }
  writer.finish();
  return TokenDataset::open(path, vocab);
}

using AttributeValue = std::variant<int64_t, double, std::string>;

// A token dataset as raw HDF5, written the way another tool (h5py) might:
// contiguous datasets, fixed-length string attributes. Every field can be
// made wrong on purpose.
struct RawDataset {
  std::vector<int32_t> tokens;
  std::vector<int64_t> offsets;
  std::optional<std::vector<uint8_t>> loss_mask;
  hid_t tokens_type = H5T_STD_I32LE;  // file dtypes; values are converted by HDF5
  hid_t offsets_type = H5T_STD_I64LE;
  hid_t mask_type = H5T_STD_U8LE;
  bool write_tokens = true;
  bool write_offsets = true;
  bool tokens_2d = false;  // /tokens as (N/2, 2)
  std::map<std::string, AttributeValue> attributes = {
      {"format_version", int64_t{1}}, {"vocab_size", int64_t{100}}, {"eos_id", int64_t{-1}},
      {"bos_id", int64_t{-1}},        {"tokenizer", "test"},        {"created_by", "raw"}};

  // Documents with the given lengths; token t of document d is (d + 3t) % 100.
  static RawDataset with_lengths(const std::vector<int64_t>& lengths) {
    RawDataset raw;
    raw.offsets.push_back(0);
    for (size_t d = 0; d < lengths.size(); ++d) {
      for (int64_t t = 0; t < lengths[d]; ++t)
        raw.tokens.push_back(static_cast<int32_t>((static_cast<int64_t>(d) + 3 * t) % 100));
      raw.offsets.push_back(static_cast<int64_t>(raw.tokens.size()));
    }
    return raw;
  }

  void write(const std::string& path) const {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    if (write_tokens) {
      std::vector<hsize_t> dims = {tokens.size()};
      if (tokens_2d) dims = {tokens.size() / 2, 2};
      write_dataset(file, "tokens", tokens_type, H5T_NATIVE_INT32, dims, tokens.data());
    }
    if (write_offsets)
      write_dataset(file, "offsets", offsets_type, H5T_NATIVE_INT64, {offsets.size()},
                    offsets.data());
    if (loss_mask)
      write_dataset(file, "loss_mask", mask_type, H5T_NATIVE_UINT8, {loss_mask->size()},
                    loss_mask->data());
    for (const auto& [name, value] : attributes)
      write_attribute(file, name, value);
    ASSERT_GE(H5Fclose(file), 0);
  }

 private:
  static void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type,
                            const std::vector<hsize_t>& dims, const void* data) {
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t dataset = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(dataset, 0);
    ASSERT_GE(H5Dwrite(dataset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
    H5Dclose(dataset);
    H5Sclose(space);
  }

  static void write_attribute(hid_t file, const std::string& name, const AttributeValue& value) {
    hid_t space = H5Screate(H5S_SCALAR);
    if (const auto* i = std::get_if<int64_t>(&value)) {
      hid_t attr = H5Acreate2(file, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(attr, H5T_NATIVE_INT64, i);
      H5Aclose(attr);
    } else if (const auto* x = std::get_if<double>(&value)) {
      hid_t attr = H5Acreate2(file, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(attr, H5T_NATIVE_DOUBLE, x);
      H5Aclose(attr);
    } else {
      const std::string& text = std::get<std::string>(value);
      hid_t type = H5Tcopy(H5T_C_S1);  // fixed length, like numpy's 'S' dtype
      H5Tset_size(type, text.size() + 1);
      hid_t attr = H5Acreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(attr, type, text.c_str());
      H5Aclose(attr);
      H5Tclose(type);
    }
    H5Sclose(space);
  }
};

}  // namespace headroom::testing
