// JsonlDocumentReader: records as written, lines across the read buffer,
// gzip, and an error for every way a line can be wrong that names the file,
// the line, the field and the element.
#include <zlib.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "data/jsonl_documents.h"
#include "data_test_util.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::TempDir;
using testing::usage_error;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void write_gzip(const std::string& path, const std::string& text) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

JsonlSchema schema(int64_t vocab = 100) {
  JsonlSchema s;
  s.vocab_size = vocab;
  return s;
}

std::vector<JsonlRecord> read_all(const std::string& path, const JsonlSchema& s) {
  JsonlDocumentReader reader(path, s);
  std::vector<JsonlRecord> records;
  JsonlRecord record;
  while (reader.next(record))
    records.push_back(record);
  return records;
}

// The UsageError for a file whose only line is `line`.
std::string error_for(const TempDir& dir, const std::string& line, JsonlSchema s = schema()) {
  const std::string path = dir.file("bad.jsonl");
  const std::string first = s.text_field.empty() ? "{\"input_ids\": [1]}" : "{\"text\": \"a\"}";
  write_file(path, first + "\n\n" + line + "\n");
  return usage_error([&] { read_all(path, s); });
}

TEST(JsonlDocuments, ReadsIdsMasksAndLabelsAndIgnoresOtherFields) {
  TempDir dir;
  const std::string path = dir.file("a.jsonl");
  write_file(path,
             "{\"input_ids\": [5, 6, 7], \"loss_mask\": [0, 1, 1]}\n"
             "\n"
             "  \t\r\n"
             "{\"id\": \"x\", \"meta\": {\"input_ids\": [\"nested\", [1]], \"n\": null}, "
             "\"input_ids\": [1, 2], \"loss_mask\": [true, false], \"attention_mask\": [1, 1]}\r\n"
             "{\"input_ids\": []}\n"
             "{\"input_ids\": [9, 8, 7]}");  // no '\n' after the last line
  JsonlDocumentReader reader(path, schema());
  JsonlRecord r;
  ASSERT_TRUE(reader.next(r));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.mask, (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_TRUE(r.has_mask);
  EXPECT_EQ(reader.line(), 1);
  ASSERT_TRUE(reader.next(r));
  EXPECT_EQ(reader.where(), path + ":4");
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.mask, (std::vector<uint8_t>{1, 0}));
  ASSERT_TRUE(reader.next(r));
  EXPECT_TRUE(r.ids.empty());
  EXPECT_FALSE(r.has_mask);
  EXPECT_TRUE(r.mask.empty());
  ASSERT_TRUE(reader.next(r));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{9, 8, 7}));
  EXPECT_FALSE(r.has_mask);
  EXPECT_EQ(reader.line(), 6);
  EXPECT_FALSE(reader.next(r));
  EXPECT_EQ(reader.lines(), 6);
  EXPECT_EQ(reader.blank_lines(), 2);
  EXPECT_EQ(reader.bytes(), static_cast<int64_t>(std::filesystem::file_size(path)));

  JsonlSchema with_labels = schema();
  with_labels.labels_field = "labels";
  write_file(path, "{\"input_ids\": [3, 4, 5, 6], \"labels\": [-100, -100, 5, 6]}\n");
  const std::vector<JsonlRecord> labelled = read_all(path, with_labels);
  ASSERT_EQ(labelled.size(), 1u);
  EXPECT_EQ(labelled[0].mask, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_TRUE(labelled[0].has_mask);

  // Other field names; an empty mask field name reads no mask.
  JsonlSchema renamed = schema();
  renamed.ids_field = "tokens";
  renamed.mask_field = "";
  write_file(path, "{\"tokens\": [1], \"loss_mask\": [\"whatever\"]}\n");
  const std::vector<JsonlRecord> plain = read_all(path, renamed);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].ids, (std::vector<int32_t>{1}));
  EXPECT_FALSE(plain[0].has_mask);
}

TEST(JsonlDocuments, TextModeReadsOnlyTheTextField) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(path, "{\"text\": \"h\\u00e9llo \\\"you\\\"\\n\", \"input_ids\": \"not read\"}\n");
  JsonlSchema s = schema();
  s.text_field = "text";
  const std::vector<JsonlRecord> records = read_all(path, s);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].text, "h\xc3\xa9llo \"you\"\n");
  EXPECT_TRUE(records[0].ids.empty());
  expect_contains(error_for(dir, "{\"text\": [1]}", s), "bad.jsonl:3: \"text\" is an array");
  expect_contains(error_for(dir, "{\"txt\": \"a\"}", s), "missing field \"text\"");
}

TEST(JsonlDocuments, LinesLongerThanTheReadBufferArriveWhole) {
  TempDir dir;
  const std::string path = dir.file("long.jsonl");
  // ~3.4 MB lines: each crosses at least two 1 MiB reads.
  std::string text;
  std::vector<std::vector<int32_t>> documents;
  for (int d = 0; d < 3; ++d) {
    std::vector<int32_t> ids;
    text += "{\"input_ids\": [";
    for (int i = 0; i < 500000 + d; ++i) {
      ids.push_back((i * 7 + d) % 32000);
      text += (i ? ", " : "") + std::to_string(ids.back());
    }
    text += "]}\n{\"input_ids\": [" + std::to_string(d) + "]}\n";
    documents.push_back(ids);
    documents.push_back({d});
  }
  write_file(path, text);
  write_gzip(dir.file("long.jsonl.gz"), text);
  for (const std::string& file : {path, dir.file("long.jsonl.gz")}) {
    SCOPED_TRACE(file);
    JsonlDocumentReader reader(file, schema(32000));
    JsonlRecord r;
    for (const std::vector<int32_t>& expected : documents) {
      ASSERT_TRUE(reader.next(r));
      EXPECT_EQ(r.ids, expected);
    }
    EXPECT_FALSE(reader.next(r));
    EXPECT_EQ(reader.bytes(), static_cast<int64_t>(text.size()));  // uncompressed
  }
}

TEST(JsonlDocuments, ATruncatedGzipFileIsAnError) {
  TempDir dir;
  std::string text;
  for (int d = 0; d < 20000; ++d)
    text += "{\"input_ids\": [" + std::to_string(d % 97) + ", " + std::to_string(d % 89) + "]}\n";
  write_gzip(dir.file("full.gz"), text);
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  const std::string message = usage_error([&] { read_all(dir.file("cut.gz"), schema()); });
  expect_contains(message, dir.file("cut.gz") + ":");
  expect_contains(message, "cannot read: unexpected end of file (a truncated gzip file?)");
}

TEST(JsonlDocuments, EveryErrorNamesTheLineFieldAndElement) {
  TempDir dir;
  const std::string at = dir.file("bad.jsonl") + ":3: ";
  struct Case {
    const char* line;
    const char* message;
  };
  const Case cases[] = {
      {"{\"input_ids\": [1, 2, x]}",
       "invalid JSON at byte 22: syntax error while parsing value - invalid literal"},
      {"{\"input_ids\": [1, 2]",
       "invalid JSON at byte 21: syntax error while parsing object - unexpected end of input"},
      {"{\"input_ids\": [1]} {}", "invalid JSON at byte 20"},
      {"[1, 2]", "expected one JSON object per line; this line holds an array"},
      {"17", "expected one JSON object per line; this line holds a number (17)"},
      {"{\"ids\": [1], \"mask\": [1]}",
       "missing field \"input_ids\" (the record has \"ids\", \"mask\")"},
      {"{}", "missing field \"input_ids\" (the record has no fields)"},
      {"{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7, \"h\": 8, \"i\": 9}",
       "missing field \"input_ids\" (the record has \"a\", \"b\", \"c\", \"d\", \"e\", \"f\", "
       "\"g\", \"h\", ...)"},
      {"{\"input_ids\": \"1 2 3\"}",
       "\"input_ids\" is a string (\"1 2 3\"); expected an array of token ids"},
      {"{\"input_ids\": {\"a\": 1}}", "\"input_ids\" is an object; expected an array of token ids"},
      {"{\"input_ids\": [1, 2.0]}",
       "input_ids[1] = 2.0: expected an integer token id in [0, vocab_size = 100)"},
      {"{\"input_ids\": [1, \"2\"]}", "input_ids[1] = \"2\": expected an integer token id"},
      {"{\"input_ids\": [1, true]}", "input_ids[1] = true: expected an integer token id"},
      {"{\"input_ids\": [1, null]}", "input_ids[1] = null: expected an integer token id"},
      {"{\"input_ids\": [1, [2]]}", "input_ids[1] is an array; expected an integer token id"},
      {"{\"input_ids\": [0, 1, 100]}", "input_ids[2] = 100 is outside [0, vocab_size = 100)"},
      {"{\"input_ids\": [-1]}", "input_ids[0] = -1 is outside [0, vocab_size = 100)"},
      {"{\"input_ids\": [1, 99999999999999999999999]}",
       "input_ids[1] = 99999999999999999999999: expected an integer token id"},
      {"{\"input_ids\": [1], \"input_ids\": [2]}", "field \"input_ids\" appears twice"},
      {"{\"input_ids\": [1, 2], \"loss_mask\": [1]}",
       "loss_mask has 1 entries but input_ids has 2: they must align one to one"},
      {"{\"loss_mask\": [1, 0, 1], \"input_ids\": [1, 2]}",
       "loss_mask has 3 entries but input_ids has 2"},
      {"{\"input_ids\": [1, 2], \"loss_mask\": [1, 2]}",
       "loss_mask[1] = 2: expected 0 or 1 (or false/true)"},
      {"{\"input_ids\": [1, 2], \"loss_mask\": [-1, 1]}", "loss_mask[0] = -1: expected 0 or 1"},
      {"{\"input_ids\": [1, 2], \"loss_mask\": [1, 0.5]}", "loss_mask[1] = 0.5: expected 0 or 1"},
      {"{\"input_ids\": [1, 2], \"loss_mask\": 1}",
       "\"loss_mask\" is a number (1); expected an array of 0/1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const std::string message = error_for(dir, c.line);
    expect_contains(message, at);
    expect_contains(message, c.message);
  }

  JsonlSchema labels = schema();
  labels.labels_field = "labels";
  expect_contains(error_for(dir, "{\"input_ids\": [4, 5, 6], \"labels\": [5, 6, -100]}", labels),
                  at + "labels[0] = 5 but input_ids[0] = 4: a label must be -100 (not a target) "
                       "or the token id itself (labels shifted by one already?)");
  expect_contains(error_for(dir, "{\"input_ids\": [4], \"labels\": [4, 5]}", labels),
                  at + "labels has 2 entries but input_ids has 1");
  expect_contains(
      error_for(dir, "{\"input_ids\": [4], \"labels\": [true]}", labels),
      at + "labels[0] = true: expected an integer: -100 (not a target) or the token id");
  expect_contains(
      error_for(dir, "{\"input_ids\": [4], \"labels\": [4], \"loss_mask\": [1]}", labels),
      at + "has both loss_mask and labels: give one of them");
}

TEST(JsonlDocuments, UnreadableInputIsAUsageErrorNamingIt) {
  TempDir dir;
  expect_contains(usage_error([&] { JsonlDocumentReader(dir.file("none.jsonl"), schema()); }),
                  dir.file("none.jsonl") + ": cannot open: No such file or directory");
  expect_contains(usage_error([&] { JsonlDocumentReader(dir.file(""), schema()); }),
                  "is a folder; expected a JSONL file");
  write_file(dir.file("a.jsonl"), "{}\n");
  expect_contains(usage_error([&] { JsonlDocumentReader(dir.file("a.jsonl"), schema(0)); }),
                  "vocab_size = 0: must be at least 1");
}

// JSON text never holds a NUL byte; nlohmann's parser takes one for the end
// of its input, which would accept the record before it.
TEST(JsonlDocuments, ANulByteIsAnErrorAtItsLine) {
  TempDir dir;
  expect_contains(error_for(dir, std::string("{\"input_ids\": [1, 2]}\0", 22)),
                  "bad.jsonl:3: NUL byte at byte 21 of the line");
  expect_contains(error_for(dir, std::string("\0{\"input_ids\": [1]}", 19)),
                  "bad.jsonl:3: NUL byte at byte 0");
  // Past the read buffer (1 MiB), in a line that has no newline yet.
  const std::string path = dir.file("long.jsonl");
  write_file(path, std::string(3 << 20, ' ') + std::string(1, '\0'));
  expect_contains(usage_error([&] { read_all(path, schema()); }),
                  "long.jsonl:1: NUL byte at byte 3145728 of the line");
}

TEST(JsonlDocuments, DevZeroStopsAtLineOneQuickly) {
  const auto start = std::chrono::steady_clock::now();
  expect_contains(usage_error([&] { read_all("/dev/zero", schema()); }),
                  "/dev/zero:1: NUL byte at byte 0 of the line");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(JsonlDocuments, AFolderIsRefusedByName) {
  TempDir dir;
  expect_contains(usage_error([&] { JsonlDocumentReader(dir.path(), schema()); }),
                  dir.path() + ": is a folder; expected a JSONL file");
}

}  // namespace
}  // namespace headroom
