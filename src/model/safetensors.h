// Weight files in the Hugging Face safetensors format, read and written
// without a second copy of the weights in memory.
//
// Layout of one file (https://github.com/huggingface/safetensors):
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON: {"<tensor>": {"dtype": "BF16", "shape": [4096, 4096],
//                                 "data_offsets": [begin, end]}, ...,
//                    "__metadata__": {"<key>": "<string value>", ...}}
//             padded with spaces so the data starts 8-byte aligned
//   rest      the data section: each tensor's bytes, row-major, little-endian;
//             data_offsets are relative to its start and together cover it
//             exactly (no gaps, no overlap, nothing after the last tensor)
// A sharded checkpoint is a folder with model.safetensors.index.json:
//   {"metadata": {...}, "weight_map": {"<tensor>": "model-00001-of-00004.safetensors", ...}}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"
#include "util/atomic_file.h"

namespace headroom {

// The element types a safetensors file may hold that headroom reads. F16 has
// no headroom DType: it is reported as stored, and a loader casts it from the
// bytes read_raw() returns. Files with other dtypes (F64, I8, F8_*, ...) are
// refused on open, naming the tensor.
enum class SafetensorsDType : uint8_t { kF32, kBF16, kF16, kI32, kI64, kU8 };

std::string_view safetensors_name(SafetensorsDType dtype);  // "F32", "BF16", "F16", ...
size_t safetensors_size(SafetensorsDType dtype);            // bytes per element
std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name);
SafetensorsDType to_safetensors(DType dtype);
std::optional<DType> to_dtype(SafetensorsDType dtype);

// One tensor of a (possibly sharded) checkpoint, as its header declares it.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset of the first element in `file`
  uint64_t nbytes = 0;  // numel * safetensors_size(dtype)
  std::string file;     // the .safetensors file that holds it

  int64_t numel() const;
};

// Reads a checkpoint: one .safetensors file, a model.safetensors.index.json,
// or a folder holding model.safetensors or else model.safetensors.index.json
// (the order transformers looks in). Everything is validated on open, so a
// broken file fails before any weight is loaded; each error is a UsageError
// naming the file and, where there is one, the tensor:
//   - the header length fits the file (and is at most 100 MB, as the reference
//     reader requires), the header is a JSON object, `__metadata__` maps
//     strings to strings;
//   - each tensor has a known dtype, a shape of non-negative integers and
//     data_offsets [begin, end] with end - begin == numel * dtype size;
//   - the tensors tile the data section exactly: no overlap, no gap, no
//     trailing bytes, nothing past the end of the file (a truncated download);
//   - sharded: every weight_map entry names a file beside the index that holds
//     that tensor, and every tensor of every shard is in the weight_map.
class SafetensorsIndex {
 public:
  static SafetensorsIndex open(const std::string& path);

  // The path open() was given.
  const std::string& source() const { return source_; }
  // Every tensor, sorted by name.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The .safetensors files, sorted.
  const std::vector<std::string>& files() const { return files_; }
  // `__metadata__` of the file; for a sharded checkpoint, the union of the
  // shards' (a key with different values in two shards is an error on open).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // nullptr when there is no such tensor.
  const SafetensorsEntry* find(std::string_view name) const;
  // Throws UsageError "<source>: no tensor "x" (did you mean "y"?)".
  const SafetensorsEntry& at(std::string_view name) const;

  // Reads tensor `name` into `dst` (entry.nbytes bytes), after checking that it
  // is stored as `dtype` with exactly `shape`; a mismatch is a UsageError
  // naming the file, the tensor, what the file has and what was expected.
  void read(std::string_view name, void* dst, DType dtype, const std::vector<int64_t>& shape) const;
  // Reads the stored bytes as they are (e.g. F16, for a loader that casts).
  void read_raw(const SafetensorsEntry& entry, void* dst) const;
  // Reads `nbytes` stored bytes of `entry` starting `byte_offset` into it:
  // part of a tensor without the rest (resharding, a streamed export). A
  // range past the tensor's end is an InternalError.
  void read_range(const SafetensorsEntry& entry, uint64_t byte_offset, uint64_t nbytes,
                  void* dst) const;

 private:
  std::string source_;
  std::vector<SafetensorsEntry> entries_;
  std::vector<std::string> files_;
  std::map<std::string, std::string> metadata_;
};

// Writes one .safetensors file without holding the weights: declare every
// tensor first (the header needs all offsets), then write each one's bytes in
// declaration order, whole or in consecutive parts, then finish(). The file
// appears at `path` only when finish() succeeds (it is written through a
// util/atomic_file.h AtomicFileWriter: a temporary beside it, flushed to
// disk, then renamed), so a crash never leaves a truncated checkpoint under
// the real name. Destroying an unfinished writer removes the temporary.
//
// The header lists tensors sorted by name (JSON object order); the data lies
// in declaration order. Misuse (a duplicate name, writing out of order, more
// bytes than declared) is an InternalError; I/O failures are UsageErrors
// naming the path ("...: No space left on device (disk full)" for a full
// disk), after which `path` is as it was and the temporary is gone.
class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void declare(const std::string& name, DType dtype, std::vector<int64_t> shape);
  void declare(const std::string& name, SafetensorsDType dtype, std::vector<int64_t> shape);

  // All of tensor `name`'s bytes (numel * dtype size).
  void write(const std::string& name, const void* data);
  // The next `nbytes` of tensor `name`: parts are appended until the tensor is
  // complete, so a sharded or converted tensor streams through a small buffer.
  void write_part(const std::string& name, const void* data, uint64_t nbytes);

  void finish();

  const std::string& path() const { return path_; }

 private:
  struct Declared {
    std::string name;
    SafetensorsDType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
  };
  void start_data();
  void append(const void* data, uint64_t nbytes);

  std::string path_;
  AtomicFileWriter file_;
  std::map<std::string, std::string> metadata_;
  std::vector<Declared> declared_;
  bool header_written_ = false;
  bool finished_ = false;
  size_t current_ = 0;         // index in declared_ of the tensor being written
  uint64_t current_done_ = 0;  // bytes of it written so far
};

}  // namespace headroom
