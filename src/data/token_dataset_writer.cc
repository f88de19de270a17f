#include "data/token_dataset_writer.h"

#include <optional>
#include <utility>
#include <vector>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hdf5/hdf5_handle.h"

namespace headroom {

using hdf5::check_internal;
using hdf5::check_usage;
using hdf5::Hid;
using hdf5::QuietHdf5Errors;

namespace {

// 64 Ki tokens = 256 KiB per chunk: big enough to compress well, small
// enough that reading one short document decompresses little it does not need.
constexpr hsize_t kTokenChunk = hsize_t{1} << 16;
constexpr hsize_t kOffsetChunk = hsize_t{1} << 14;
// Buffered elements before a write: bounds the writer's memory (~5 MiB).
constexpr size_t kFlushTokens = size_t{1} << 20;
constexpr size_t kFlushOffsets = size_t{1} << 16;

Hid create_vector(hid_t file, const char* name, hid_t file_type, hsize_t chunk,
                  const std::string& path) {
  const std::string what = std::string("cannot create /") + name;
  const hsize_t dims[1] = {0};
  const hsize_t max_dims[1] = {H5S_UNLIMITED};
  Hid space(check_internal(H5Screate_simple(1, dims, max_dims), path, what));
  Hid create(check_internal(H5Pcreate(H5P_DATASET_CREATE), path, what));
  check_internal(H5Pset_chunk(create.get(), 1, &chunk), path, what);
  // Byte shuffle before deflate: token ids' high bytes are mostly equal, so
  // grouping bytes by significance compresses noticeably better. A library
  // built without zlib still writes a valid (uncompressed) file.
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
    check_internal(H5Pset_shuffle(create.get()), path, what);
    check_internal(H5Pset_deflate(create.get(), 4), path, what);
  }
  return Hid(check_internal(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT), path,
      what));
}

// Appends `count` elements after the `written` already in `table`.
void append(hid_t dataset, hid_t mem_type, const void* data, int64_t& written, size_t count,
            const std::string& path, const char* table) {
  hdf5::append_rows(dataset, mem_type, data, static_cast<hsize_t>(written), count, path, table);
  written += static_cast<int64_t>(count);
}

}  // namespace

struct TokenDatasetWriter::State {
  std::string path;
  // Created first, before HDF5 opens it by name (with H5F_ACC_TRUNC, as it
  // is empty); it outlives the HDF5 handles below.
  std::optional<AtomicFileWriter> temp;
  TokenDatasetAttributes attributes;
  bool with_mask = false;
  bool finished = false;
  int64_t num_documents = 0;
  int64_t num_tokens = 0;

  std::vector<int32_t> token_buffer;
  std::vector<uint8_t> mask_buffer;
  std::vector<int64_t> offset_buffer;
  int64_t tokens_written = 0;
  int64_t masks_written = 0;
  int64_t offsets_written = 0;

  // Datasets after the file: they close first (reverse member order).
  Hid file;
  Hid tokens;
  Hid offsets;
  Hid mask;

  void flush_tokens() {
    append(tokens.get(), H5T_NATIVE_INT32, token_buffer.data(), tokens_written, token_buffer.size(),
           path, "/tokens");
    token_buffer.clear();
    if (with_mask) {
      append(mask.get(), H5T_NATIVE_UINT8, mask_buffer.data(), masks_written, mask_buffer.size(),
             path, "/loss_mask");
      mask_buffer.clear();
    }
  }

  void flush_offsets() {
    append(offsets.get(), H5T_NATIVE_INT64, offset_buffer.data(), offsets_written,
           offset_buffer.size(), path, "/offsets");
    offset_buffer.clear();
  }

  // Closes the temporary without writing more and removes it. After a
  // failed write HDF5 still holds what it could not write (a full disk), and
  // closing would retry it, fail again, and leave the file open until
  // HDF5's shutdown at exit, which then loops or crashes; detached, those
  // writes go to memory.
  void abandon() noexcept {
    hdf5::detach_from_disk(file.get());
    mask.reset();
    offsets.reset();
    tokens.reset();
    file.reset();
    H5Eclear2(H5E_DEFAULT);
    temp.reset();  // removes the temporary
  }
};

TokenDatasetWriter::TokenDatasetWriter(std::string path, TokenDatasetAttributes attributes,
                                       bool with_loss_mask)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.path = std::move(path);
  s.attributes = std::move(attributes);
  s.with_mask = with_loss_mask;
  if (s.attributes.vocab_size < 1)
    throw UsageError(s.path + ": vocab_size = " + std::to_string(s.attributes.vocab_size) +
                     ": a token dataset needs a vocabulary of at least 1");
  s.temp.emplace(s.path);
  const std::string& temp_path = s.temp->temp_path();
  QuietHdf5Errors quiet;
  // A failure here throws past the destructor; ~State removes the temporary.
  s.file = Hid(check_usage(H5Fcreate(temp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                           s.path, "cannot create token dataset " + temp_path));
  try {
    s.tokens = create_vector(s.file.get(), "tokens", H5T_STD_I32LE, kTokenChunk, s.path);
    s.offsets = create_vector(s.file.get(), "offsets", H5T_STD_I64LE, kOffsetChunk, s.path);
    if (s.with_mask)
      s.mask = create_vector(s.file.get(), "loss_mask", H5T_STD_U8LE, kTokenChunk, s.path);
  } catch (...) {
    s.abandon();
    throw;
  }
  s.offset_buffer.push_back(0);
}

TokenDatasetWriter::~TokenDatasetWriter() {
  if (state_->finished) return;
  // Abandoned (an exception, or never finished): leave nothing behind that
  // looks like a dataset.
  QuietHdf5Errors quiet;
  state_->abandon();
}

void TokenDatasetWriter::append_document(std::span<const int32_t> tokens,
                                         std::span<const uint8_t> mask) {
  State& s = *state_;
  HR_CHECK(!s.finished, "append_document after finish");
  const std::string where = s.path + ": document " + std::to_string(s.num_documents);
  if (!mask.empty() && !s.with_mask)
    throw UsageError(where + " has a loss mask, but the writer was made without /loss_mask");
  if (!mask.empty() && mask.size() != tokens.size())
    throw UsageError(where + ": loss mask has " + std::to_string(mask.size()) + " entries for " +
                     std::to_string(tokens.size()) + " tokens");
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= s.attributes.vocab_size)
      throw UsageError(
          where + ", position " + std::to_string(t) + ": token " + std::to_string(tokens[t]) +
          " is outside [0, vocab_size = " + std::to_string(s.attributes.vocab_size) + ")");
  }
  QuietHdf5Errors quiet;
  s.token_buffer.insert(s.token_buffer.end(), tokens.begin(), tokens.end());
  if (s.with_mask) {
    if (mask.empty())
      s.mask_buffer.insert(s.mask_buffer.end(), tokens.size(), uint8_t{1});
    else
      s.mask_buffer.insert(s.mask_buffer.end(), mask.begin(), mask.end());
  }
  s.num_tokens += static_cast<int64_t>(tokens.size());
  s.num_documents += 1;
  s.offset_buffer.push_back(s.num_tokens);
  if (s.token_buffer.size() >= kFlushTokens) s.flush_tokens();
  if (s.offset_buffer.size() >= kFlushOffsets) s.flush_offsets();
}

TokenDatasetAttributes& TokenDatasetWriter::attributes() {
  return state_->attributes;
}
int64_t TokenDatasetWriter::num_documents() const {
  return state_->num_documents;
}
int64_t TokenDatasetWriter::num_tokens() const {
  return state_->num_tokens;
}

void TokenDatasetWriter::finish() {
  State& s = *state_;
  HR_CHECK(!s.finished, "finish called twice");
  const TokenDatasetAttributes& a = s.attributes;
  if (a.vocab_size < 1)
    throw UsageError(s.path + ": vocab_size = " + std::to_string(a.vocab_size) +
                     ": must be at least 1");
  for (const auto& [name, id] : {std::pair{"eos_id", a.eos_id}, std::pair{"bos_id", a.bos_id}}) {
    if (id < -1 || id >= a.vocab_size)
      throw UsageError(s.path + ": " + name + " = " + std::to_string(id) +
                       " is outside [-1, vocab_size = " + std::to_string(a.vocab_size) + ")");
  }
  QuietHdf5Errors quiet;
  s.flush_tokens();
  s.flush_offsets();
  const hid_t file = s.file.get();
  hdf5::write_int64_attribute(file, "format_version", TokenDataset::kFormatVersion, s.path);
  hdf5::write_int64_attribute(file, "vocab_size", a.vocab_size, s.path);
  hdf5::write_int64_attribute(file, "eos_id", a.eos_id, s.path);
  hdf5::write_int64_attribute(file, "bos_id", a.bos_id, s.path);
  hdf5::write_string_attribute(file, "tokenizer", a.tokenizer, s.path);
  hdf5::write_string_attribute(file, "created_by", a.created_by, s.path);
  if (a.source_entropy_nats)
    hdf5::write_double_attribute(file, "source_entropy_nats", *a.source_entropy_nats, s.path);
  // Everything reaches the disk here, while the handles are still open: if
  // this fails the destructor abandons the file cleanly, and once it has
  // succeeded the closes below have nothing left to write.
  hdf5::check_internal(H5Fflush(file, H5F_SCOPE_GLOBAL), s.path, "cannot write");
  bool closed = s.mask.reset();
  closed = s.offsets.reset() && closed;
  closed = s.tokens.reset() && closed;
  closed = s.file.reset() && closed;
  if (!closed) hdf5::fail_internal(s.path, "cannot close token dataset " + s.temp->temp_path());
  // A reader sees the old file or the whole new one, never a prefix.
  s.temp->commit();
  s.finished = true;
}

}  // namespace headroom
