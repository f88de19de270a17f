#include "data/token_dataset.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "util/error.h"
#include "util/hdf5/hdf5_handle.h"

namespace headroom {

using hdf5::check_usage;
using hdf5::describe_type;
using hdf5::fail_usage;
using hdf5::Hid;
using hdf5::QuietHdf5Errors;

namespace {

// Validation reads /tokens in slabs of this many: 4 MiB of int32, small
// enough to never matter next to a model, large enough to stream at disk speed.
constexpr int64_t kValidateSlab = int64_t{1} << 20;

// Per-dataset chunk cache: documents are read in shuffled order, so the cache
// mostly serves documents that share a chunk with their predecessor; a few
// MiB covers a compressed chunk's worth of short documents.
constexpr size_t kChunkCacheBytes = size_t{16} << 20;

struct Expected {
  H5T_class_t type_class;
  size_t size;
  H5T_sign_t sign;
  const char* name;  // as numpy names it
};

constexpr Expected kInt32{H5T_INTEGER, 4, H5T_SGN_2, "int32"};
constexpr Expected kInt64{H5T_INTEGER, 8, H5T_SGN_2, "int64"};
constexpr Expected kUint8{H5T_INTEGER, 1, H5T_SGN_NONE, "uint8"};

// Opens a 1-D dataset of the expected dtype and returns it with its length;
// a missing dataset returns an invalid Hid when !required.
std::pair<Hid, int64_t> open_vector(hid_t file, const std::string& path, const char* name,
                                    const Expected& expected, bool required) {
  const std::string dataset = std::string("/") + name;
  const htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
  if (exists < 0) fail_usage(path, "cannot look up " + dataset);
  if (exists == 0) {
    if (!required) return {Hid(), 0};
    throw UsageError(path + ": missing dataset " + dataset +
                     " (a token dataset holds /tokens and /offsets; see docs/data-format.md)");
  }
  Hid access(check_usage(H5Pcreate(H5P_DATASET_ACCESS), path, "H5Pcreate"));
  check_usage(H5Pset_chunk_cache(access.get(), 12421, kChunkCacheBytes, 1.0), path,
              "H5Pset_chunk_cache");
  Hid data(check_usage(H5Dopen2(file, name, access.get()), path, "cannot open " + dataset));
  Hid type(check_usage(H5Dget_type(data.get()), path, "cannot read the dtype of " + dataset));
  if (H5Tget_class(type.get()) != expected.type_class || H5Tget_size(type.get()) != expected.size ||
      H5Tget_sign(type.get()) != expected.sign)
    throw UsageError(path + ": " + dataset + " has dtype " + describe_type(type.get()) +
                     "; expected " + expected.name);
  Hid space(check_usage(H5Dget_space(data.get()), path, "cannot read the shape of " + dataset));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank != 1)
    throw UsageError(path + ": " + dataset + " has " + std::to_string(rank) +
                     " dimensions; expected 1");
  hsize_t length = 0;
  check_usage(H5Sget_simple_extent_dims(space.get(), &length, nullptr), path,
              "cannot read the shape of " + dataset);
  return {std::move(data), static_cast<int64_t>(length)};
}

// Reads elements [start, start + count) of a 1-D dataset into `out`.
void read_slab(hid_t dataset, hid_t mem_type, int64_t start, int64_t count, void* out,
               const std::string& path, const char* name) {
  if (count == 0) return;
  const std::string what = std::string("cannot read /") + name + "[" + std::to_string(start) + ":" +
                           std::to_string(start + count) + "]";
  Hid file_space(check_usage(H5Dget_space(dataset), path, what));
  const hsize_t starts[1] = {static_cast<hsize_t>(start)};
  const hsize_t counts[1] = {static_cast<hsize_t>(count)};
  check_usage(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, starts, nullptr, counts, nullptr), path,
      what);
  Hid mem_space(check_usage(H5Screate_simple(1, counts, nullptr), path, what));
  check_usage(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out), path,
              what);
}

int64_t required_int(hid_t file, const std::string& path, const char* name) {
  std::optional<int64_t> value = hdf5::read_int64_attribute(file, name, path);
  if (!value) throw UsageError(path + ": missing attribute " + name + " (see docs/data-format.md)");
  return *value;
}

std::string required_string(hid_t file, const std::string& path, const char* name) {
  std::optional<std::string> value = hdf5::read_string_attribute(file, name, path);
  if (!value) throw UsageError(path + ": missing attribute " + name + " (see docs/data-format.md)");
  return *value;
}

TokenDatasetAttributes read_attributes(hid_t file, const std::string& path) {
  TokenDatasetAttributes a;
  // format_version first: a file from a newer (or another) tool should say
  // so, not fail on whichever attribute it happens to lack.
  a.format_version = required_int(file, path, "format_version");
  if (a.format_version != TokenDataset::kFormatVersion)
    throw UsageError(path + ": format_version = " + std::to_string(a.format_version) +
                     "; this build reads format_version " +
                     std::to_string(TokenDataset::kFormatVersion));
  a.vocab_size = required_int(file, path, "vocab_size");
  if (a.vocab_size < 1 || a.vocab_size > (int64_t{1} << 31))
    throw UsageError(path + ": vocab_size = " + std::to_string(a.vocab_size) +
                     ": expected 1..2^31 (token ids are int32)");
  a.eos_id = required_int(file, path, "eos_id");
  a.bos_id = required_int(file, path, "bos_id");
  for (const auto& [name, id] : {std::pair{"eos_id", a.eos_id}, std::pair{"bos_id", a.bos_id}}) {
    if (id < -1 || id >= a.vocab_size)
      throw UsageError(path + ": " + name + " = " + std::to_string(id) +
                       " is outside [-1, vocab_size = " + std::to_string(a.vocab_size) +
                       ") (-1 = none)");
  }
  a.tokenizer = required_string(file, path, "tokenizer");
  a.created_by = required_string(file, path, "created_by");
  a.source_entropy_nats = hdf5::read_double_attribute(file, "source_entropy_nats", path);
  if (a.source_entropy_nats && !(*a.source_entropy_nats >= 0.0))
    throw UsageError(path + ": source_entropy_nats = " + std::to_string(*a.source_entropy_nats) +
                     ": an entropy is a non-negative number");
  return a;
}

// Offsets: a start at 0, never decreasing, never past /tokens, ending at its
// length. The first violation in index order is reported.
void validate_offsets(const std::vector<int64_t>& offsets, int64_t num_tokens,
                      const std::string& path) {
  if (offsets.empty())
    throw UsageError(
        path + ": /offsets is empty: it holds one entry per document plus one (at least [0])");
  auto at = [](size_t i) { return "/offsets[" + std::to_string(i) + "] = "; };
  if (offsets[0] != 0)
    throw UsageError(path + ": " + at(0) + std::to_string(offsets[0]) +
                     ": offsets must start at 0");
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1])
      throw UsageError(path + ": " + at(i) + std::to_string(offsets[i]) + " < " + at(i - 1) +
                       std::to_string(offsets[i - 1]) + ": offsets must not decrease");
    if (offsets[i] > num_tokens)
      throw UsageError(path + ": " + at(i) + std::to_string(offsets[i]) + " > " +
                       std::to_string(num_tokens) + ", the length of /tokens: offset out of range");
  }
  if (offsets.back() != num_tokens)
    throw UsageError(path + ": " + at(offsets.size() - 1) + std::to_string(offsets.back()) +
                     " != " + std::to_string(num_tokens) +
                     ", the length of /tokens: the last offset must equal it");
}

// Every token in [0, limit), streamed slab by slab; the message names the
// first bad index, its document and position, and which limit it broke.
void validate_tokens(hid_t tokens, const std::vector<int64_t>& offsets, int64_t num_tokens,
                     int64_t file_vocab, int64_t model_vocab, const std::string& path) {
  std::vector<int32_t> slab;
  for (int64_t start = 0; start < num_tokens; start += kValidateSlab) {
    const int64_t count = std::min(kValidateSlab, num_tokens - start);
    slab.resize(static_cast<size_t>(count));
    read_slab(tokens, H5T_NATIVE_INT32, start, count, slab.data(), path, "tokens");
    for (int64_t j = 0; j < count; ++j) {
      const int64_t token = slab[static_cast<size_t>(j)];
      std::string broken;
      if (token < 0) {
        broken = " < 0: token ids must not be negative";
      } else if (model_vocab > 0 && token >= model_vocab) {
        broken = " >= " + std::to_string(model_vocab) +
                 ", the model's vocab_size: token id out of range (tokenized for another model?)";
      } else if (token >= file_vocab) {
        broken = " >= " + std::to_string(file_vocab) +
                 ", the file's vocab_size attribute: token id out of range";
      } else {
        continue;
      }
      const int64_t index = start + j;
      const auto next = std::upper_bound(offsets.begin(), offsets.end(), index);
      const int64_t document = (next - offsets.begin()) - 1;
      throw UsageError(path + ": /tokens[" + std::to_string(index) +
                       "] = " + std::to_string(token) + broken + " (document " +
                       std::to_string(document) + ", position " +
                       std::to_string(index - offsets[static_cast<size_t>(document)]) + ")");
    }
  }
}

// What training can learn from: the Batcher (batcher.cc, append_document)
// makes position t of a document predict token t + 1 when t + 1 < its length
// and, with a /loss_mask, loss_mask[t + 1] != 0. So token j of a document is a
// target iff j >= 1 (and its mask is 1).
struct TargetStats {
  int64_t targets = 0;
  // The smallest in-document index of a target over all documents; -1 = none.
  // A document cut to its first k tokens keeps a target iff its earliest one is
  // below k, so this one number answers for every truncation.
  int64_t earliest = -1;
};

void note_earliest(TargetStats& stats, int64_t position) {
  if (stats.earliest < 0 || position < stats.earliest) stats.earliest = position;
}

TargetStats targets_without_mask(const std::vector<int64_t>& offsets) {
  TargetStats stats;
  for (size_t d = 0; d + 1 < offsets.size(); ++d) {
    const int64_t length = offsets[d + 1] - offsets[d];
    if (length < 2) continue;
    stats.targets += length - 1;
    stats.earliest = 1;
  }
  return stats;
}

// Streams /loss_mask slab by slab: every value must be 0 or 1 (the message
// names the first other one, its document and position), and the targets
// are counted as above.
TargetStats validate_loss_mask(hid_t mask, const std::vector<int64_t>& offsets, int64_t num_tokens,
                               const std::string& path) {
  TargetStats stats;
  std::vector<uint8_t> slab;
  size_t document = 0;  // the document holding token `index`
  for (int64_t start = 0; start < num_tokens; start += kValidateSlab) {
    const int64_t count = std::min(kValidateSlab, num_tokens - start);
    slab.resize(static_cast<size_t>(count));
    read_slab(mask, H5T_NATIVE_UINT8, start, count, slab.data(), path, "loss_mask");
    for (int64_t j = 0; j < count; ++j) {
      const int64_t index = start + j;
      while (offsets[document + 1] <= index)  // skips empty documents too
        ++document;
      const uint8_t value = slab[static_cast<size_t>(j)];
      const int64_t position = index - offsets[document];
      if (value > 1)
        throw UsageError(path + ": /loss_mask[" + std::to_string(index) +
                         "] = " + std::to_string(value) + " (document " + std::to_string(document) +
                         ", position " + std::to_string(position) +
                         "): expected 0 (not a target) or 1 (a target)");
      if (value == 0 || position == 0) continue;  // a document's first token is no target
      ++stats.targets;
      note_earliest(stats, position);
    }
  }
  return stats;
}

}  // namespace

struct TokenDataset::State {
  std::string path;
  TokenDatasetAttributes attributes;
  std::vector<int64_t> offsets;  // num_documents + 1
  int64_t num_tokens = 0;
  TargetStats targets;
  // The datasets are declared after the file so they close before it
  // (members are destroyed in reverse order).
  Hid file;
  Hid tokens;
  Hid loss_mask;  // invalid when the file has none
};

TokenDataset::TokenDataset(std::unique_ptr<State> state) : state_(std::move(state)) {}
TokenDataset::TokenDataset(TokenDataset&&) noexcept = default;
TokenDataset& TokenDataset::operator=(TokenDataset&&) noexcept = default;
TokenDataset::~TokenDataset() = default;

TokenDataset TokenDataset::open(const std::string& path, int64_t model_vocab) {
  HR_CHECK(model_vocab >= 0, "model_vocab is a vocabulary size or 0");
  QuietHdf5Errors quiet;
  auto state = std::make_unique<State>();
  state->path = path;

  std::error_code ignored;
  if (std::filesystem::is_regular_file(path, ignored) && H5Fis_hdf5(path.c_str()) == 0)
    throw UsageError(path + ": not an HDF5 file (a token dataset is written by data_tools/)");
  state->file = Hid(check_usage(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                                "cannot open token dataset"));
  const hid_t file = state->file.get();

  state->attributes = read_attributes(file, path);
  auto [tokens, num_tokens] = open_vector(file, path, "tokens", kInt32, true);
  auto [offsets, num_offsets] = open_vector(file, path, "offsets", kInt64, true);
  auto [mask, num_mask] = open_vector(file, path, "loss_mask", kUint8, false);
  if (mask.valid() && num_mask != num_tokens)
    throw UsageError(path + ": /loss_mask has " + std::to_string(num_mask) +
                     " entries but /tokens has " + std::to_string(num_tokens) +
                     ": they must align one to one");

  state->offsets.resize(static_cast<size_t>(num_offsets));
  read_slab(offsets.get(), H5T_NATIVE_INT64, 0, num_offsets, state->offsets.data(), path,
            "offsets");
  validate_offsets(state->offsets, num_tokens, path);
  validate_tokens(tokens.get(), state->offsets, num_tokens, state->attributes.vocab_size,
                  model_vocab, path);

  state->targets = mask.valid() ? validate_loss_mask(mask.get(), state->offsets, num_tokens, path)
                                : targets_without_mask(state->offsets);
  state->num_tokens = num_tokens;
  state->tokens = std::move(tokens);
  state->loss_mask = std::move(mask);
  return TokenDataset(std::move(state));
}

const std::string& TokenDataset::path() const {
  return state_->path;
}
const TokenDatasetAttributes& TokenDataset::attributes() const {
  return state_->attributes;
}
int64_t TokenDataset::num_documents() const {
  return static_cast<int64_t>(state_->offsets.size()) - 1;
}
int64_t TokenDataset::num_tokens() const {
  return state_->num_tokens;
}
bool TokenDataset::has_loss_mask() const {
  return state_->loss_mask.valid();
}

int64_t TokenDataset::num_targets() const {
  return state_->targets.targets;
}

void TokenDataset::check_trainable(int64_t truncate_at) const {
  HR_CHECK(truncate_at >= 0, "truncate_at is a token count or 0");
  const std::string& path = state_->path;
  const std::string nothing = ": nothing to train on";
  if (num_documents() == 0) throw UsageError(path + ": no documents (/offsets = [0])" + nothing);
  if (num_tokens() == 0)
    throw UsageError(path + ": all " + std::to_string(num_documents()) +
                     " documents are empty (/tokens has no entries)" + nothing);
  const int64_t earliest = state_->targets.earliest;
  if (earliest < 0 && !has_loss_mask())
    throw UsageError(path + ": no document has 2 or more tokens" + nothing +
                     " (a token's target is the next token of its document)");
  if (earliest < 0)
    throw UsageError(path + ": /loss_mask is 0 at every token that could be a target (every " +
                     "token after its document's first)" + nothing);
  if (truncate_at > 0 && earliest >= truncate_at)
    throw UsageError(path + ": documents cut to their first " + std::to_string(truncate_at) +
                     " tokens (data.max_sample_tokens, or seq_len in padded mode) keep no " +
                     "target: the earliest target of any document is its token " +
                     std::to_string(earliest) + nothing);
}

int64_t TokenDataset::document_offset(int64_t document) const {
  HR_CHECK(document >= 0 && document < num_documents(),
           "document " + std::to_string(document) + " of " + std::to_string(num_documents()));
  return state_->offsets[static_cast<size_t>(document)];
}

int64_t TokenDataset::document_length(int64_t document) const {
  const int64_t start = document_offset(document);
  return state_->offsets[static_cast<size_t>(document) + 1] - start;
}

void TokenDataset::read_document(int64_t document, std::vector<int32_t>& tokens,
                                 std::vector<uint8_t>& mask, int64_t max_tokens) const {
  const int64_t start = document_offset(document);
  int64_t length = document_length(document);
  if (max_tokens > 0) length = std::min(length, max_tokens);
  QuietHdf5Errors quiet;
  tokens.resize(static_cast<size_t>(length));
  read_slab(state_->tokens.get(), H5T_NATIVE_INT32, start, length, tokens.data(), state_->path,
            "tokens");
  if (!has_loss_mask()) {
    mask.clear();
    return;
  }
  mask.resize(static_cast<size_t>(length));
  read_slab(state_->loss_mask.get(), H5T_NATIVE_UINT8, start, length, mask.data(), state_->path,
            "loss_mask");
}

}  // namespace headroom
