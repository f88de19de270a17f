#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/text.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_error.h"

namespace headroom {

namespace {

struct DTypeInfo {
  SafetensorsDType dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 6> kDTypes = {{
    {SafetensorsDType::kF32, "F32", 4},
    {SafetensorsDType::kBF16, "BF16", 2},
    {SafetensorsDType::kF16, "F16", 2},
    {SafetensorsDType::kI32, "I32", 4},
    {SafetensorsDType::kI64, "I64", 8},
    {SafetensorsDType::kU8, "U8", 1},
}};

// The reference implementation refuses larger headers; so do we, so that a
// corrupt length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string quote(std::string_view text) {
  return toml_quote(text);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string describe(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// "<path>: <what>: <strerror>", with "(disk full)" for ENOSPC, EDQUOT, EFBIG.
[[noreturn]] void io_error(const std::string& path, const std::string& what) {
  throw_file_error(path, what, errno);
}

// A file descriptor that closes itself.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags, mode)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `n` bytes at `offset`; pread may return fewer (at most ~2 GiB
// per call on Linux), so loop.
void read_exact(int fd, const std::string& path, uint64_t offset, void* dst, uint64_t n) {
  auto* out = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      io_error(path,
               "cannot read " + std::to_string(n) + " bytes at offset " + std::to_string(offset));
    }
    if (got == 0)
      throw UsageError(path + ": file ends at byte " + std::to_string(offset + done) +
                       ", inside the " + std::to_string(n) + " bytes at offset " +
                       std::to_string(offset) + " (was it truncated after it was opened?)");
    done += static_cast<uint64_t>(got);
  }
}

uint64_t as_offset(const nlohmann::json& value, bool& ok) {
  ok = value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
  return ok ? value.get<uint64_t>() : 0;
}

struct ParsedFile {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& value, uint64_t data_start, uint64_t data_size) {
  const std::string where = path + ": tensor " + quote(name) + ": ";
  if (!value.is_object())
    throw UsageError(where + "expected an object with dtype, shape and data_offsets, got " +
                     describe(value));
  SafetensorsEntry e;
  e.name = name;
  e.file = path;

  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string())
    throw UsageError(where + "dtype: expected a string such as \"BF16\", got " +
                     (dtype == value.end() ? "nothing" : describe(*dtype)));
  const std::optional<SafetensorsDType> parsed = parse_safetensors_dtype(dtype->get<std::string>());
  if (!parsed)
    throw UsageError(where + "dtype: " + quote(dtype->get<std::string>()) +
                     " is not one headroom reads (F32, BF16, F16, I32, I64, U8)");
  e.dtype = *parsed;

  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array())
    throw UsageError(where + "shape: expected an array of non-negative integers, got " +
                     (shape == value.end() ? "nothing" : describe(*shape)));
  uint64_t numel = 1;
  bool too_big = false;
  for (const nlohmann::json& dim : *shape) {
    bool ok = false;
    const uint64_t d = as_offset(dim, ok);
    if (!ok || d > static_cast<uint64_t>(INT64_MAX))
      throw UsageError(where + "shape: expected an array of non-negative integers, got " +
                       describe(*shape));
    e.shape.push_back(static_cast<int64_t>(d));
    too_big = too_big || __builtin_mul_overflow(numel, d, &numel);
  }
  too_big = too_big || __builtin_mul_overflow(numel, safetensors_size(e.dtype), &e.nbytes);

  auto offsets = value.find("data_offsets");
  bool ok_begin = false, ok_end = false;
  uint64_t begin = 0, end = 0;
  if (offsets != value.end() && offsets->is_array() && offsets->size() == 2) {
    begin = as_offset((*offsets)[0], ok_begin);
    end = as_offset((*offsets)[1], ok_end);
  }
  if (!ok_begin || !ok_end || begin > end)
    throw UsageError(where + "data_offsets: expected [begin, end] with 0 <= begin <= end, got " +
                     (offsets == value.end() ? "nothing" : describe(*offsets)));
  const std::string span =
      "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (too_big || end - begin != e.nbytes)
    throw UsageError(where + span + " hold " + std::to_string(end - begin) + " bytes, but " +
                     std::string(safetensors_name(e.dtype)) + " " + shape_text(e.shape) +
                     " needs " + (too_big ? "more than 2^64" : std::to_string(e.nbytes)));
  if (end > data_size)
    throw UsageError(where + span + " run past the end of the data section (" +
                     std::to_string(data_size) + " bytes): is the file truncated?");
  e.offset = data_start + begin;
  return e;
}

ParsedFile parse_file(const std::string& path) {
  Fd fd(path, O_RDONLY | O_CLOEXEC);
  if (fd.get() < 0) io_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) io_error(path, "cannot stat");
  if (S_ISDIR(st.st_mode)) throw UsageError(path + ": is a folder, expected a .safetensors file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8)
    throw UsageError(path + ": not a safetensors file: " + std::to_string(size) +
                     " bytes, too short for the 8-byte header length");

  std::array<unsigned char, 8> prefix{};
  read_exact(fd.get(), path, 0, prefix.data(), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | prefix[static_cast<size_t>(i)];
  if (header_len > size - 8)
    throw UsageError(path + ": header length " + std::to_string(header_len) +
                     " (the first 8 bytes) runs past the end of the file (" + std::to_string(size) +
                     " bytes): truncated, or not a safetensors file");
  if (header_len > kMaxHeaderBytes)
    throw UsageError(path + ": header length " + std::to_string(header_len) +
                     " exceeds the safetensors limit of 100 MB: not a safetensors file?");

  std::string header(header_len, '\0');
  read_exact(fd.get(), path, 8, header.data(), header_len);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(header);
  } catch (const nlohmann::json::parse_error& error) {
    throw_json_syntax_error(path + ": header", error.what(), error.byte, " of the header");
  } catch (const nlohmann::json::out_of_range& error) {
    throw_json_number_error(path, error.what(), " in the header");
  }
  if (!root.is_object())
    throw UsageError(path + ": header: expected a JSON object, got " + describe(root));

  ParsedFile out;
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        throw UsageError(path + ": __metadata__: expected an object of strings, got " +
                         describe(value));
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          throw UsageError(path + ": __metadata__." + k + ": expected a string, got " +
                           describe(v));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(path, key, value, data_start, data_size));
  }

  // The tensors must tile the data section: sorted by position, each starts
  // where the previous one ended and the last ends at the end of the file.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : out.entries)
    by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  auto span = [&](const SafetensorsEntry& e) {
    return quote(e.name) + " [" + std::to_string(e.offset - data_start) + ", " +
           std::to_string(e.offset - data_start + e.nbytes) + "]";
  };
  uint64_t cursor = data_start;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->offset < cursor)
      throw UsageError(path + ": tensors " + span(*previous) + " and " + span(*e) +
                       " overlap (data_offsets)");
    if (e->offset > cursor)
      throw UsageError(path + ": " + std::to_string(e->offset - cursor) + " bytes before tensor " +
                       span(*e) + " belong to no tensor; safetensors data must be contiguous");
    cursor = e->offset + e->nbytes;
    previous = e;
  }
  if (cursor != size)
    throw UsageError(path + ": " + std::to_string(size - cursor) +
                     " bytes after the last tensor's data belong to no tensor (the header "
                     "declares " +
                     std::to_string(cursor - data_start) + " data bytes, the file holds " +
                     std::to_string(data_size) + ")");
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) io_error(path, "cannot open");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad() || (file.fail() && !file.eof())) io_error(path, "cannot read");
  return text.str();
}

}  // namespace

std::string_view safetensors_name(SafetensorsDType dtype) {
  return kDTypes[static_cast<size_t>(dtype)].name;
}

size_t safetensors_size(SafetensorsDType dtype) {
  return kDTypes[static_cast<size_t>(dtype)].size;
}

std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name) {
  for (const DTypeInfo& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

SafetensorsDType to_safetensors(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return SafetensorsDType::kF32;
    case DType::kBF16:
      return SafetensorsDType::kBF16;
    case DType::kF16:
      return SafetensorsDType::kF16;
    case DType::kI32:
      return SafetensorsDType::kI32;
    case DType::kI64:
      return SafetensorsDType::kI64;
    case DType::kU8:
      return SafetensorsDType::kU8;
  }
  throw InternalError("to_safetensors: unknown DType " + std::to_string(static_cast<int>(dtype)));
}

std::optional<DType> to_dtype(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF32:
      return DType::kF32;
    case SafetensorsDType::kBF16:
      return DType::kBF16;
    case SafetensorsDType::kF16:
      return DType::kF16;
    case SafetensorsDType::kI32:
      return DType::kI32;
    case SafetensorsDType::kI64:
      return DType::kI64;
    case SafetensorsDType::kU8:
      return DType::kU8;
  }
  return std::nullopt;
}

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// --- reading ------------------------------------------------------------------

SafetensorsIndex SafetensorsIndex::open(const std::string& path) {
  namespace fs = std::filesystem;
  SafetensorsIndex index;
  index.source_ = path;

  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw UsageError(path +
                     ": cannot open: " + (ec ? ec.message() : std::string(std::strerror(ENOENT))));
  std::string single;
  std::string index_json;
  if (fs::is_directory(status)) {
    if (fs::exists(fs::path(path) / kSingleFile)) {
      single = (fs::path(path) / kSingleFile).string();
    } else if (fs::exists(fs::path(path) / kIndexFile)) {
      index_json = (fs::path(path) / kIndexFile).string();
    } else {
      throw UsageError(path + ": holds neither " + kSingleFile + " nor " + kIndexFile);
    }
  } else if (path.ends_with(".json")) {
    index_json = path;
  } else {
    single = path;
  }

  if (!single.empty()) {
    ParsedFile file = parse_file(single);
    index.entries_ = std::move(file.entries);
    index.metadata_ = std::move(file.metadata);
    index.files_ = {single};
  } else {
    nlohmann::json root;
    try {
      root = nlohmann::json::parse(read_text(index_json));
    } catch (const nlohmann::json::parse_error& error) {
      throw_json_syntax_error(index_json, error.what(), error.byte);
    } catch (const nlohmann::json::out_of_range& error) {
      throw_json_number_error(index_json, error.what());
    }
    if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
      throw UsageError(
          index_json + ": weight_map: expected an object {tensor name: shard file}, got " +
          (root.is_object() && root.contains("weight_map") ? describe(root["weight_map"])
                                                           : std::string("nothing")));
    // Shard file -> the tensors the index says it holds.
    std::map<std::string, std::set<std::string>> shards;
    const fs::path folder = fs::path(index_json).parent_path();
    for (const auto& [name, file] : root["weight_map"].items()) {
      if (!file.is_string())
        throw UsageError(index_json + ": weight_map." + name + ": expected a file name, got " +
                         describe(file));
      const fs::path relative(file.get<std::string>());
      // Shards live beside the index; a path out of the folder is a broken
      // (or hostile) index, not a layout to follow.
      const bool escapes = relative.is_absolute() || relative.empty() ||
                           std::any_of(relative.begin(), relative.end(),
                                       [](const fs::path& part) { return part == ".."; });
      if (escapes)
        throw UsageError(index_json + ": weight_map." + name +
                         ": expected a file name beside the index, got " + describe(file));
      shards[(folder / relative).string()].insert(name);
    }
    for (const auto& [shard, names] : shards) {
      ParsedFile file = parse_file(shard);
      std::set<std::string> present;
      for (SafetensorsEntry& e : file.entries) {
        if (!names.contains(e.name))
          throw UsageError(shard + ": tensor " + quote(e.name) + " is not in the weight_map of " +
                           index_json);
        present.insert(e.name);
        index.entries_.push_back(std::move(e));
      }
      for (const std::string& name : names)
        if (!present.contains(name))
          throw UsageError(index_json + ": weight_map puts tensor " + quote(name) + " in " + shard +
                           ", which has no such tensor");
      for (const auto& [key, value] : file.metadata) {
        auto [it, inserted] = index.metadata_.emplace(key, value);
        if (!inserted && it->second != value)
          throw UsageError(shard + ": __metadata__." + key + " = " + quote(value) +
                           " differs from another shard's " + quote(it->second));
      }
      index.files_.push_back(shard);
    }
  }
  std::sort(index.entries_.begin(), index.entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });
  return index;
}

const SafetensorsEntry* SafetensorsIndex::find(std::string_view name) const {
  auto it =
      std::lower_bound(entries_.begin(), entries_.end(), name,
                       [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

const SafetensorsEntry& SafetensorsIndex::at(std::string_view name) const {
  if (const SafetensorsEntry* e = find(name)) return *e;
  std::vector<std::string_view> names;
  for (const SafetensorsEntry& e : entries_)
    names.push_back(e.name);
  const std::optional<std::string> near = nearest_word(name, names);
  throw UsageError(source_ + ": no tensor " + quote(name) +
                   (near ? " (did you mean " + quote(*near) + "?)" : ""));
}

void SafetensorsIndex::read(std::string_view name, void* dst, DType dtype,
                            const std::vector<int64_t>& shape) const {
  const SafetensorsEntry& e = at(name);
  const std::string where = e.file + ": tensor " + quote(e.name) + ": ";
  if (e.dtype != to_safetensors(dtype))
    throw UsageError(where + "stored as " + std::string(safetensors_name(e.dtype)) + ", expected " +
                     std::string(safetensors_name(to_safetensors(dtype))));
  if (e.shape != shape)
    throw UsageError(where + "shape " + shape_text(e.shape) + " in the file, expected " +
                     shape_text(shape));
  read_raw(e, dst);
}

void SafetensorsIndex::read_raw(const SafetensorsEntry& entry, void* dst) const {
  if (entry.nbytes == 0) return;
  Fd fd(entry.file, O_RDONLY | O_CLOEXEC);
  if (fd.get() < 0) io_error(entry.file, "cannot open");
  read_exact(fd.get(), entry.file, entry.offset, dst, entry.nbytes);
}

void SafetensorsIndex::read_range(const SafetensorsEntry& entry, uint64_t byte_offset,
                                  uint64_t nbytes, void* dst) const {
  HR_CHECK(byte_offset <= entry.nbytes && nbytes <= entry.nbytes - byte_offset,
           entry.file + ": " + entry.name + ": a range past the tensor's end");
  if (nbytes == 0) return;
  Fd fd(entry.file, O_RDONLY | O_CLOEXEC);
  if (fd.get() < 0) io_error(entry.file, "cannot open");
  read_exact(fd.get(), entry.file, entry.offset + byte_offset, dst, nbytes);
}

// --- writing ------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata)
    : path_(std::move(path)), file_(path_), metadata_(std::move(metadata)) {}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::declare(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  declare(name, to_safetensors(dtype), std::move(shape));
}

void SafetensorsWriter::declare(const std::string& name, SafetensorsDType dtype,
                                std::vector<int64_t> shape) {
  HR_CHECK(!header_written_, "declare(" + name + ") after data was written to " + path_);
  HR_CHECK(!name.empty() && name != "__metadata__", "bad tensor name " + quote(name));
  for (const Declared& d : declared_)
    HR_CHECK(d.name != name, "tensor " + quote(name) + " declared twice for " + path_);
  uint64_t nbytes = safetensors_size(dtype);
  for (int64_t d : shape) {
    HR_CHECK(d >= 0, "negative dimension in " + quote(name) + " " + shape_text(shape));
    HR_CHECK(!__builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes),
             "tensor " + quote(name) + " " + shape_text(shape) + " overflows 2^64 bytes");
  }
  declared_.push_back({name, dtype, std::move(shape), nbytes});
}

void SafetensorsWriter::start_data() {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Declared& d : declared_) {
    header[d.name] = {{"dtype", std::string(safetensors_name(d.dtype))},
                      {"shape", d.shape},
                      {"data_offsets", nlohmann::json::array({offset, offset + d.nbytes})}};
    offset += d.nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error& error) {
    throw UsageError(path_ + ": tensor names and metadata must be UTF-8: " + error.what());
  }
  // Pad with spaces (which the format allows) so the data starts 8-byte
  // aligned, as the reference writer does: a reader that maps the file can
  // then view any tensor in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::array<unsigned char, 8> prefix{};
  for (size_t i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  header_written_ = true;
  append(prefix.data(), prefix.size());
  append(text.data(), text.size());
}

void SafetensorsWriter::append(const void* data, uint64_t nbytes) {
  file_.write(data, nbytes);
}

void SafetensorsWriter::write(const std::string& name, const void* data) {
  HR_CHECK(current_done_ == 0, "write(" + name + ") after a partial write_part of it");
  HR_CHECK(current_ < declared_.size(), "write(" + name + "): every declared tensor is written");
  write_part(name, data, declared_[current_].nbytes);
}

void SafetensorsWriter::write_part(const std::string& name, const void* data, uint64_t nbytes) {
  HR_CHECK(!finished_, "write to " + path_ + " after finish()");
  HR_CHECK(current_ < declared_.size() && declared_[current_].name == name,
           "write(" + quote(name) + ") out of order: expected " +
               (current_ < declared_.size() ? quote(declared_[current_].name)
                                            : std::string("no more tensors")));
  const Declared& d = declared_[current_];
  HR_CHECK(nbytes <= d.nbytes - current_done_,
           "write_part(" + quote(name) + ") of " + std::to_string(nbytes) + " bytes: only " +
               std::to_string(d.nbytes - current_done_) + " remain");
  if (!header_written_) start_data();
  append(data, nbytes);
  current_done_ += nbytes;
  if (current_done_ == d.nbytes) {
    ++current_;
    current_done_ = 0;
  }
}

void SafetensorsWriter::finish() {
  HR_CHECK(!finished_, "finish() twice for " + path_);
  if (!header_written_) start_data();
  HR_CHECK(
      current_ == declared_.size(),
      "finish() before tensor " + quote(declared_[current_].name) + " was written to " + path_);
  file_.commit();
  finished_ = true;
}

}  // namespace headroom
