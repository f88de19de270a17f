// safetensors: round trips (single file, sharded, streamed in parts), the
// on-disk layout other readers expect, atomic writes, and a clear error for
// every kind of broken file. Files are checked against an independent
// pure-numpy reader and writer when /usr/bin/python3 has numpy.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

template <typename T>
std::vector<T> iota(size_t n, T start) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<bf16> bf16s(const std::vector<float>& values) {
  std::vector<bf16> out;
  for (float v : values)
    out.push_back(to_bf16(v));
  return out;
}

// What every round-trip test writes: each dtype headroom has, a scalar and an
// empty tensor, declared out of name order.
struct Sample {
  std::vector<float> w = iota<float>(15, -7.25f);            // F32 [3, 5]
  std::vector<bf16> b = bf16s({1.5f, -2.0f, 3.25f, 1e-3f});  // BF16 [4]
  std::vector<int64_t> ids = {-1, 0, 1LL << 40, 7};          // I64 [2, 2]
  std::vector<uint8_t> mask = {0, 1, 2, 3, 255, 128, 7};     // U8 [7]
  int32_t count = -123456;                                   // I32 []

  void declare(SafetensorsWriter& writer) const {
    writer.declare("z.weight", DType::kF32, {3, 5});
    writer.declare("a.bias", DType::kBF16, {4});
    writer.declare("ids", DType::kI64, {2, 2});
    writer.declare("mask", DType::kU8, {7});
    writer.declare("count", DType::kI32, {});
    writer.declare("empty", DType::kF32, {0, 3});
  }
  void write(SafetensorsWriter& writer) const {
    writer.write("z.weight", w.data());
    writer.write("a.bias", b.data());
    writer.write("ids", ids.data());
    writer.write("mask", mask.data());
    writer.write("count", &count);
    writer.write("empty", nullptr);
  }
  void write_file(const std::string& path, std::map<std::string, std::string> metadata = {}) const {
    SafetensorsWriter writer(path, std::move(metadata));
    declare(writer);
    write(writer);
    writer.finish();
  }
  void expect_read_back(const SafetensorsIndex& index) const {
    std::vector<float> w2(15);
    index.read("z.weight", w2.data(), DType::kF32, {3, 5});
    EXPECT_EQ(w2, w);
    std::vector<bf16> b2(4);
    index.read("a.bias", b2.data(), DType::kBF16, {4});
    EXPECT_EQ(std::memcmp(b2.data(), b.data(), 8), 0);
    std::vector<int64_t> ids2(4);
    index.read("ids", ids2.data(), DType::kI64, {2, 2});
    EXPECT_EQ(ids2, ids);
    std::vector<uint8_t> mask2(7);
    index.read("mask", mask2.data(), DType::kU8, {7});
    EXPECT_EQ(mask2, mask);
    int32_t count2 = 0;
    index.read("count", &count2, DType::kI32, {});
    EXPECT_EQ(count2, count);
    index.read("empty", nullptr, DType::kF32, {0, 3});
  }
};

// A UsageError's message, or a note that there was none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

// A file from raw parts: the 8-byte length (the header's, unless overridden),
// the header text and the data.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               std::optional<uint64_t> length = std::nullopt) {
  const uint64_t n = length.value_or(header.size());
  std::string bytes;
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  write_file(path, bytes + header + data);
}

// --- dtypes -------------------------------------------------------------------

TEST(SafetensorsDTypes, NamesSizesAndMapping) {
  for (auto [dtype, name, size] : {std::tuple{SafetensorsDType::kF32, "F32", 4},
                                   {SafetensorsDType::kBF16, "BF16", 2},
                                   {SafetensorsDType::kF16, "F16", 2},
                                   {SafetensorsDType::kI32, "I32", 4},
                                   {SafetensorsDType::kI64, "I64", 8},
                                   {SafetensorsDType::kU8, "U8", 1}}) {
    EXPECT_EQ(safetensors_name(dtype), name);
    EXPECT_EQ(safetensors_size(dtype), static_cast<size_t>(size));
    EXPECT_EQ(parse_safetensors_dtype(name), dtype);
  }
  EXPECT_EQ(parse_safetensors_dtype("F64"), std::nullopt);
  EXPECT_EQ(parse_safetensors_dtype("bf16"), std::nullopt);  // the format spells it BF16
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kU8}) {
    EXPECT_EQ(to_dtype(to_safetensors(d)), d);
    EXPECT_EQ(safetensors_size(to_safetensors(d)), size_of(d));
  }
}

// --- round trips --------------------------------------------------------------

TEST(Safetensors, SingleFileRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  Sample sample;
  sample.write_file(path, {{"format", "pt"}, {"headroom.step", "12"}});
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.safetensors"});  // no temporary left

  const SafetensorsIndex index = SafetensorsIndex::open(path);
  EXPECT_EQ(index.source(), path);
  EXPECT_EQ(index.files(), std::vector<std::string>{path});
  EXPECT_EQ(index.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}, {"headroom.step", "12"}}));
  std::vector<std::string> names;
  for (const SafetensorsEntry& e : index.entries())
    names.push_back(e.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"a.bias", "count", "empty", "ids", "mask", "z.weight"}));

  const SafetensorsEntry& w = index.at("z.weight");
  EXPECT_EQ(w.dtype, SafetensorsDType::kF32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(w.nbytes, 60u);
  EXPECT_EQ(w.numel(), 15);
  EXPECT_EQ(w.file, path);
  EXPECT_EQ(index.at("count").shape, std::vector<int64_t>{});
  EXPECT_EQ(index.at("count").numel(), 1);
  EXPECT_EQ(index.at("empty").nbytes, 0u);
  EXPECT_EQ(index.find("nope"), nullptr);
  sample.expect_read_back(index);

  // The data section starts 8-byte aligned and lies in declaration order.
  const std::string bytes = read_file(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);  // little-endian host
  EXPECT_EQ((8 + header_len) % 8, 0u);
  EXPECT_EQ(w.offset, 8 + header_len);
  EXPECT_EQ(index.at("a.bias").offset, w.offset + 60);
  EXPECT_EQ(bytes.size(), 8 + header_len + 60 + 8 + 32 + 7 + 4);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_NE(bytes.find("\"__metadata__\":{\"format\":\"pt\""), std::string::npos);
}

TEST(Safetensors, WritingInPartsGivesTheSameFile) {
  TempDir dir;
  Sample sample;
  sample.write_file(dir.file("whole.safetensors"));

  SafetensorsWriter writer(dir.file("parts.safetensors"));
  sample.declare(writer);
  const auto* w = reinterpret_cast<const char*>(sample.w.data());
  writer.write_part("z.weight", w, 7);
  writer.write_part("z.weight", w + 7, 0);
  writer.write_part("z.weight", w + 7, 53);
  writer.write_part("a.bias", sample.b.data(), 8);
  writer.write("ids", sample.ids.data());
  writer.write("mask", sample.mask.data());
  writer.write("count", &sample.count);
  writer.write("empty", nullptr);
  writer.finish();
  EXPECT_EQ(read_file(dir.file("parts.safetensors")), read_file(dir.file("whole.safetensors")));
}

TEST(Safetensors, ReadRangeReadsPartOfATensor) {
  TempDir dir;
  Sample sample;
  sample.write_file(dir.file("s.safetensors"));
  const SafetensorsIndex index = SafetensorsIndex::open(dir.file("s.safetensors"));
  const SafetensorsEntry& z = index.at("z.weight");
  const auto* w = reinterpret_cast<const char*>(sample.w.data());
  std::vector<char> part(13);
  index.read_range(z, 7, 13, part.data());
  EXPECT_EQ(std::string(part.begin(), part.end()), std::string(w + 7, 13));
  index.read_range(z, z.nbytes, 0, part.data());  // nothing, at the end
  EXPECT_THROW(index.read_range(z, z.nbytes - 4, 8, part.data()), InternalError);
}

TEST(Safetensors, FolderWithModelSafetensors) {
  TempDir dir;
  Sample sample;
  sample.write_file(dir.file("model.safetensors"));
  const SafetensorsIndex index = SafetensorsIndex::open(dir.path());
  EXPECT_EQ(index.files(), std::vector<std::string>{dir.file("model.safetensors")});
  sample.expect_read_back(index);
}

TEST(Safetensors, AnEmptyFileHasOnlyAHeader) {
  TempDir dir;
  SafetensorsWriter writer(dir.file("e.safetensors"));
  writer.finish();
  const SafetensorsIndex index = SafetensorsIndex::open(dir.file("e.safetensors"));
  EXPECT_TRUE(index.entries().empty());
  EXPECT_TRUE(index.metadata().empty());
}

// Two shards and the index transformers writes beside them.
void write_sharded(const TempDir& dir, const Sample& sample) {
  {
    SafetensorsWriter one(dir.file("model-00001-of-00002.safetensors"), {{"format", "pt"}});
    one.declare("z.weight", DType::kF32, {3, 5});
    one.declare("a.bias", DType::kBF16, {4});
    one.declare("count", DType::kI32, {});
    one.write("z.weight", sample.w.data());
    one.write("a.bias", sample.b.data());
    one.write("count", &sample.count);
    one.finish();
  }
  {
    SafetensorsWriter two(dir.file("model-00002-of-00002.safetensors"),
                          {{"format", "pt"}, {"shard", "2"}});
    two.declare("ids", DType::kI64, {2, 2});
    two.declare("mask", DType::kU8, {7});
    two.declare("empty", DType::kF32, {0, 3});
    two.write("ids", sample.ids.data());
    two.write("mask", sample.mask.data());
    two.write("empty", nullptr);
    two.finish();
  }
  write_file(dir.file("model.safetensors.index.json"), R"({
  "metadata": {"total_size": 111},
  "weight_map": {
    "a.bias": "model-00001-of-00002.safetensors",
    "count": "model-00001-of-00002.safetensors",
    "empty": "model-00002-of-00002.safetensors",
    "ids": "model-00002-of-00002.safetensors",
    "mask": "model-00002-of-00002.safetensors",
    "z.weight": "model-00001-of-00002.safetensors"
  }
})");
}

TEST(Safetensors, ShardedRoundTrip) {
  TempDir dir;
  Sample sample;
  write_sharded(dir, sample);
  for (const std::string& path :
       std::vector<std::string>{dir.path(), dir.file("model.safetensors.index.json")}) {
    SCOPED_TRACE(path);
    const SafetensorsIndex index = SafetensorsIndex::open(path);
    EXPECT_EQ(index.files(),
              (std::vector<std::string>{dir.file("model-00001-of-00002.safetensors"),
                                        dir.file("model-00002-of-00002.safetensors")}));
    EXPECT_EQ(index.entries().size(), 6u);
    EXPECT_EQ(index.at("ids").file, dir.file("model-00002-of-00002.safetensors"));
    EXPECT_EQ(index.at("a.bias").file, dir.file("model-00001-of-00002.safetensors"));
    EXPECT_EQ(index.metadata(),
              (std::map<std::string, std::string>{{"format", "pt"}, {"shard", "2"}}));
    sample.expect_read_back(index);
  }
}

TEST(Safetensors, ShardedErrors) {
  Sample sample;
  auto index_with = [&](const TempDir& dir, const std::string& extra, const std::string& drop) {
    std::string map;
    for (const auto& [name, shard] :
         std::vector<std::pair<std::string, std::string>>{{"a.bias", "1"},
                                                          {"count", "1"},
                                                          {"empty", "2"},
                                                          {"ids", "2"},
                                                          {"mask", "2"},
                                                          {"z.weight", "1"}}) {
      if (name == drop) continue;
      map += "\"" + name + "\": \"model-0000" + shard + "-of-00002.safetensors\", ";
    }
    write_file(dir.file("model.safetensors.index.json"), "{\"weight_map\": {" + map + extra + "}}");
  };
  {
    TempDir dir;
    write_sharded(dir, sample);
    index_with(dir, R"("ghost": "model-00001-of-00002.safetensors")", "");
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
              dir.file("model.safetensors.index.json") + ": weight_map puts tensor \"ghost\" in " +
                  dir.file("model-00001-of-00002.safetensors") + ", which has no such tensor");
  }
  {
    TempDir dir;
    write_sharded(dir, sample);
    index_with(dir, R"("x": "model-00002-of-00002.safetensors")", "mask");
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
              dir.file("model-00002-of-00002.safetensors") +
                  ": tensor \"mask\" is not in the weight_map of " +
                  dir.file("model.safetensors.index.json"));
  }
  {
    TempDir dir;
    write_sharded(dir, sample);
    std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
    EXPECT_EQ(
        error_of([&] { SafetensorsIndex::open(dir.path()); }),
        dir.file("model-00002-of-00002.safetensors") + ": cannot open: No such file or directory");
  }
  {
    TempDir dir;
    write_sharded(dir, sample);
    index_with(dir, R"("x": "../elsewhere.safetensors")", "");
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
              dir.file("model.safetensors.index.json") +
                  ": weight_map.x: expected a file name beside the index, got "
                  "\"../elsewhere.safetensors\"");
  }
  {
    TempDir dir;
    write_file(dir.file("model.safetensors.index.json"), R"({"metadata": {}})");
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
              dir.file("model.safetensors.index.json") +
                  ": weight_map: expected an object {tensor name: shard file}, got nothing");
    write_file(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": }})");
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
              dir.file("model.safetensors.index.json") +
                  ": JSON syntax error at byte 22 (line 1, column 22): syntax error while "
                  "parsing value - unexpected '}'; expected '[', '{', or a literal");
  }
  {
    TempDir dir;
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
              dir.path() + ": holds neither model.safetensors nor model.safetensors.index.json");
    EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.file("missing.safetensors")); }),
              dir.file("missing.safetensors") + ": cannot open: No such file or directory");
  }
}

TEST(Safetensors, ShardsWithConflictingMetadata) {
  TempDir dir;
  for (const std::string shard : {"1", "2"}) {
    SafetensorsWriter w(dir.file("s" + shard + ".safetensors"), {{"format", "pt" + shard}});
    w.declare("t" + shard, DType::kU8, {1});
    const uint8_t byte = 1;
    w.write("t" + shard, &byte);
    w.finish();
  }
  write_file(dir.file("model.safetensors.index.json"),
             R"({"weight_map": {"t1": "s1.safetensors", "t2": "s2.safetensors"}})");
  EXPECT_EQ(error_of([&] { SafetensorsIndex::open(dir.path()); }),
            dir.file("s2.safetensors") +
                ": __metadata__.format = \"pt2\" differs from another shard's \"pt1\"");
}

// --- reading with expectations ------------------------------------------------

TEST(Safetensors, ReadChecksNameDtypeAndShape) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  Sample sample;
  sample.write_file(path);
  const SafetensorsIndex index = SafetensorsIndex::open(path);
  std::vector<char> buffer(1024);
  EXPECT_EQ(error_of([&] {
              index.read("z.weight", buffer.data(), DType::kBF16, {3, 5});
            }),
            path + ": tensor \"z.weight\": stored as F32, expected BF16");
  EXPECT_EQ(error_of([&] {
              index.read("z.weight", buffer.data(), DType::kF32, {5, 3});
            }),
            path + ": tensor \"z.weight\": shape [3, 5] in the file, expected [5, 3]");
  EXPECT_EQ(error_of([&] {
              index.read("z.weigth", buffer.data(), DType::kF32, {3, 5});
            }),
            path + ": no tensor \"z.weigth\" (did you mean \"z.weight\"?)");
  EXPECT_EQ(error_of([&] { index.at("model.norm.weight"); }),
            path + ": no tensor \"model.norm.weight\"");
}

// A checkpoint of the tiny preset under the Hugging Face names, as the loader
// will read it: every tensor is found with its documented shape.
TEST(Safetensors, TinyModelUnderHuggingFaceNames) {
  const ModelConfig c = model_preset("tiny-qwen2");
  const int64_t C = c.hidden_size, D = c.head_dim, Q = c.num_heads * D, KV = c.num_kv_heads * D;
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
      {"model.embed_tokens.weight", {c.vocab_size, C}},
      {"model.layers.0.self_attn.q_proj.weight", {Q, C}},
      {"model.layers.0.self_attn.q_proj.bias", {Q}},
      {"model.layers.0.self_attn.k_proj.bias", {KV}},
      {"model.norm.weight", {C}},
      {"lm_head.weight", {c.vocab_size, C}}};
  {
    SafetensorsWriter writer(path, {{"format", "pt"}});
    for (const auto& [name, shape] : tensors)
      writer.declare(name, DType::kBF16, shape);
    for (const auto& [name, shape] : tensors) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      std::vector<bf16> data(static_cast<size_t>(n), to_bf16(0.5f));
      writer.write(name, data.data());
    }
    writer.finish();
  }
  const SafetensorsIndex index = SafetensorsIndex::open(dir.path());
  for (const auto& [name, shape] : tensors) {
    const SafetensorsEntry& e = index.at(name);
    EXPECT_EQ(e.shape, shape) << name;
    std::vector<bf16> data(static_cast<size_t>(e.numel()));
    index.read(name, data.data(), DType::kBF16, shape);
    EXPECT_EQ(to_float(data.back()), 0.5f) << name;
  }
}

// --- atomic writes and misuse -------------------------------------------------

TEST(SafetensorsWriter, NothingAppearsUntilFinish) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_file(path, "previous checkpoint");
  {
    SafetensorsWriter writer(path);
    writer.declare("x", DType::kF32, {2});
    const float x[2] = {1, 2};
    writer.write("x", x);
    EXPECT_EQ(read_file(path), "previous checkpoint");  // still the old file
    EXPECT_EQ(dir.listing().size(), 2u);                // plus the temporary
    // Destroyed unfinished, as when an exception unwinds a save.
  }
  EXPECT_EQ(read_file(path), "previous checkpoint");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.safetensors"});
}

TEST(SafetensorsWriter, MisuseIsAnInternalError) {
  TempDir dir;
  const float x[4] = {1, 2, 3, 4};
  {
    SafetensorsWriter w(dir.file("a.safetensors"));
    w.declare("x", DType::kF32, {2});
    EXPECT_THROW(w.declare("x", DType::kF32, {2}), InternalError);
    w.declare("y", DType::kF32, {2});
    EXPECT_THROW(w.write("y", x), InternalError);  // out of declaration order
    w.write("x", x);
    EXPECT_THROW(w.declare("z", DType::kF32, {1}), InternalError);  // after data
    EXPECT_THROW(w.write_part("y", x, 12), InternalError);          // more than declared
    EXPECT_THROW(w.finish(), InternalError);                        // y not written
  }
  SafetensorsWriter w(dir.file("b.safetensors"));
  EXPECT_THROW(w.declare("__metadata__", DType::kF32, {1}), InternalError);
  EXPECT_THROW(w.declare("n", DType::kF32, {-1}), InternalError);
}

TEST(SafetensorsWriter, UncreatableFileIsAUsageError) {
  EXPECT_EQ(error_of([] { SafetensorsWriter w("/nonexistent-dir/w.safetensors"); })
                .rfind("/nonexistent-dir/w.safetensors: cannot create "
                       "/nonexistent-dir/w.safetensors.tmp-",
                       0),
            0u);
}

// --- broken files -------------------------------------------------------------

class BrokenFile : public ::testing::Test {
 protected:
  std::string open_error() {
    return error_of([&] { SafetensorsIndex::open(path); });
  }
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
};

TEST_F(BrokenFile, Truncated) {
  Sample sample;
  sample.write_file(path);
  const std::string bytes = read_file(path);
  write_file(path, bytes.substr(0, bytes.size() - 1));
  // 111 data bytes: z.weight 60, a.bias 8, ids 32, mask 7, count 4 (last), empty 0.
  EXPECT_EQ(open_error(), path +
                              ": tensor \"count\": data_offsets [107, 111] run past the end of "
                              "the data section (110 bytes): is the file truncated?");
  write_file(path, bytes.substr(0, 5));
  EXPECT_EQ(open_error(),
            path + ": not a safetensors file: 5 bytes, too short for the 8-byte header length");
  write_file(path, bytes.substr(0, 40));
  EXPECT_NE(open_error().find(": header length "), std::string::npos) << open_error();
}

TEST_F(BrokenFile, HeaderLengthPastTheEnd) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  write_raw(path, header, "x", 1u << 20);
  EXPECT_EQ(open_error(), path +
                              ": header length 1048576 (the first 8 bytes) runs past the end "
                              "of the file (" +
                              std::to_string(8 + header.size() + 1) +
                              " bytes): truncated, or not a safetensors file");
  // Not a safetensors file at all: the "length" is 8 bytes of text.
  const std::string zip = "PK\x03\x04 this is a zip file, not weights";
  write_file(path, zip);
  EXPECT_NE(
      open_error().find("runs past the end of the file (" + std::to_string(zip.size()) + " bytes)"),
      std::string::npos)
      << open_error();
}

TEST_F(BrokenFile, HeaderIsNotJson) {
  write_raw(path, R"({"a":{"dtype":"U8",)", "");
  EXPECT_EQ(open_error(), path +
                              ": header: JSON syntax error at byte 20 of the header (line 1, "
                              "column 20): syntax error while parsing object key - unexpected "
                              "end of input; expected string literal");
  write_raw(path, "[1, 2]", "");
  EXPECT_EQ(open_error(), path + ": header: expected a JSON object, got [1,2]");
}

TEST_F(BrokenFile, OverlappingOffsets) {
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            std::string(12, '\0'));
  EXPECT_EQ(open_error(), path + ": tensors \"a\" [0, 8] and \"b\" [4, 12] overlap (data_offsets)");
}

TEST_F(BrokenFile, GapsAndTrailingBytes) {
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
            std::string(20, '\0'));
  EXPECT_EQ(open_error(), path +
                              ": 4 bytes before tensor \"b\" [12, 20] belong to no tensor; "
                              "safetensors data must be contiguous");
  write_raw(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
            std::string(12, '\0'));
  EXPECT_EQ(open_error(), path +
                              ": 4 bytes after the last tensor's data belong to no tensor (the "
                              "header declares 8 data bytes, the file holds 12)");
}

TEST_F(BrokenFile, SizeDisagreesWithShape) {
  write_raw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
            std::string(8, '\0'));
  EXPECT_EQ(open_error(),
            path + ": tensor \"a\": data_offsets [0, 8] hold 8 bytes, but F32 [3] needs 12");
  write_raw(path, R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})",
            std::string(8, '\0'));
  EXPECT_EQ(open_error(), path +
                              ": tensor \"a\": data_offsets [0, 8] hold 8 bytes, but U8 "
                              "[4294967296, 4294967296, 16] needs more than 2^64");
}

TEST_F(BrokenFile, MalformedEntries) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
       "tensor \"a\": dtype: \"F64\" is not one headroom reads (F32, BF16, F16, I32, I64, U8)"},
      {R"({"a":{"shape":[1],"data_offsets":[0,8]}})",
       "tensor \"a\": dtype: expected a string such as \"BF16\", got nothing"},
      {R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,8]}})",
       "tensor \"a\": shape: expected an array of non-negative integers, got [-1]"},
      {R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[8,0]}})",
       "tensor \"a\": data_offsets: expected [begin, end] with 0 <= begin <= end, got [8,0]"},
      {R"({"a":{"dtype":"U8","shape":[8]}})",
       "tensor \"a\": data_offsets: expected [begin, end] with 0 <= begin <= end, got nothing"},
      {R"({"a":[1]})",
       "tensor \"a\": expected an object with dtype, shape and data_offsets, got [1]"},
      {R"({"__metadata__":{"step":12},"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
       "__metadata__.step: expected a string, got 12"},
  };
  for (const auto& [header, message] : cases) {
    write_raw(path, header, std::string(8, '\0'));
    EXPECT_EQ(open_error(), path + ": " + message);
  }
}

// --- other readers and writers ------------------------------------------------

// An independent reader and writer of the format in a few lines of numpy, so
// the tests do not only check this implementation against itself.
constexpr const char* kNumpyScript = R"PY(
import json, struct, sys
import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64,
          "U8": np.uint8, "BF16": np.uint16}

def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(info["shape"])
    return out, meta

def write(path, tensors, meta):
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, (code, a) in sorted(tensors.items()):
        data = a.tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

mode, path = sys.argv[1], sys.argv[2]
if mode == "check":
    t, meta = read(path)
    assert meta == {"format": "pt", "note": "caf\u00e9"}, meta
    assert sorted(t) == ["a.bias", "count", "empty", "ids", "mask", "z.weight"], sorted(t)
    assert t["z.weight"].dtype == np.float32 and t["z.weight"].shape == (3, 5)
    assert (t["z.weight"].ravel() == np.arange(15, dtype=np.float32) - 7.25).all()
    # bf16 of 1e-3 by round-to-nearest-even on the float32 bits, worked here independently.
    u = int(np.array(1e-3, dtype=np.float32).view(np.uint32))
    r = np.array(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16, dtype=np.uint32).view(np.float32)
    assert t["a.bias"].tolist() == [1.5, -2.0, 3.25, float(r)], t["a.bias"]
    assert t["ids"].tolist() == [[-1, 0], [2**40, 7]]
    assert t["mask"].tolist() == [0, 1, 2, 3, 255, 128, 7]
    assert t["count"].shape == () and int(t["count"]) == -123456
    assert t["empty"].shape == (0, 3)
    print("ok")
else:
    write(path, {"h": ("F16", np.array([[0.5, -1.25], [65504.0, 1e-4]], dtype=np.float16)),
                 "f": ("F32", np.arange(6, dtype=np.float32).reshape(2, 3) / 4),
                 "i": ("I64", np.array([5, -6], dtype=np.int64))},
          {"writer": "numpy"})
    print("ok")
)PY";

TEST(SafetensorsInterop, NumpyReadsOurFile) {
  if (!testing::have_numpy()) GTEST_SKIP() << testing::kPython << " has no numpy";
  TempDir dir;
  Sample sample;
  sample.write_file(dir.file("w.safetensors"), {{"format", "pt"}, {"note", "caf\xc3\xa9"}});
  write_file(dir.file("st.py"), kNumpyScript);
  const testing::CommandResult py =
      testing::run_command(std::string(testing::kPython) + " " + dir.file("st.py") + " check " +
                           dir.file("w.safetensors"));
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, "ok\n");
}

TEST(SafetensorsInterop, WeReadNumpysFileIncludingF16) {
  if (!testing::have_numpy()) GTEST_SKIP() << testing::kPython << " has no numpy";
  TempDir dir;
  write_file(dir.file("st.py"), kNumpyScript);
  const std::string path = dir.file("np.safetensors");
  const testing::CommandResult py = testing::run_command(std::string(testing::kPython) + " " +
                                                         dir.file("st.py") + " write " + path);
  ASSERT_EQ(py.exit_code, 0) << py.output;

  const SafetensorsIndex index = SafetensorsIndex::open(path);
  EXPECT_EQ(index.metadata(), (std::map<std::string, std::string>{{"writer", "numpy"}}));
  std::vector<float> f(6);
  index.read("f", f.data(), DType::kF32, {2, 3});
  EXPECT_EQ(f, (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f}));
  std::vector<int64_t> i(2);
  index.read("i", i.data(), DType::kI64, {2});
  EXPECT_EQ(i, (std::vector<int64_t>{5, -6}));

  // F16 is reported as stored; the loader casts from the raw bytes.
  const SafetensorsEntry& h = index.at("h");
  EXPECT_EQ(h.dtype, SafetensorsDType::kF16);
  EXPECT_EQ(h.nbytes, 8u);
  std::vector<uint16_t> half(4);
  EXPECT_EQ(error_of([&] {
              index.read("h", half.data(), DType::kBF16, {2, 2});
            }),
            path + ": tensor \"h\": stored as F16, expected BF16");
  index.read_raw(h, half.data());
  // IEEE half bit patterns of 0.5, -1.25, 65504 and 1e-4 (rounded).
  EXPECT_EQ(half, (std::vector<uint16_t>{0x3800, 0xbd00, 0x7bff, 0x068e}));
}

}  // namespace
}  // namespace headroom
