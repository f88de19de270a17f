// convert_jsonl_to_dataset() (data/convert.h) called directly, without the
// `headroom` binary: JSONL of ids and of text (through the small handmade
// GPT-2 style tokenizer of tests/tokenizer/) read back from the dataset, and
// errors that name the file and line and leave nothing behind. The CLI
// around it is tested in tests/cli/data_convert_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/convert.h"
#include "data/token_dataset.h"
#include "data_test_util.h"
#include "test_util/source_tree.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::TempDir;
using testing::usage_error;

const std::string kTinyTokenizer = testing::source_dir() + "/tests/tokenizer/tiny_gpt2.json";

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct Read {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
};

Read document(const TokenDataset& dataset, int64_t d) {
  Read r;
  dataset.read_document(d, r.tokens, r.mask);
  return r;
}

TEST(Convert, IdsWithMasksBosAndEos) {
  TempDir dir;
  const std::string in = dir.file("in.jsonl");
  write_text(in,
             "{\"input_ids\": [5, 6, 7], \"loss_mask\": [0, 1, 1]}\n"
             "\n"
             "{\"input_ids\": [], \"loss_mask\": []}\n"
             "{\"input_ids\": [1, 8, 9], \"loss_mask\": [0, 0, 1]}\n"
             "{\"input_ids\": [4], \"loss_mask\": [1]}\n");
  ConvertOptions o;
  o.in = in;
  o.out = dir.file("out.h5");
  o.schema.vocab_size = 10;
  o.bos = 1;
  o.eos = 2;
  o.prepend_bos = true;
  o.append_eos = true;
  o.min_tokens = 4;
  o.created_by = "test_convert";
  const ConvertSummary s = convert_jsonl_to_dataset(o);

  EXPECT_EQ(s.input, in);
  EXPECT_EQ(s.output, o.out);
  EXPECT_EQ(s.lines, 5);
  EXPECT_EQ(s.blank_lines, 1);
  EXPECT_EQ(s.bytes, static_cast<int64_t>(std::filesystem::file_size(in)));
  EXPECT_EQ(s.skipped_empty, 1);
  EXPECT_EQ(s.dropped_short, 1);  // [1, 4, 2]: three tokens once bos and eos are added
  EXPECT_EQ(s.documents, 2);
  EXPECT_EQ(s.tokens, 9);
  EXPECT_TRUE(s.with_mask);
  EXPECT_EQ(s.mask_ones, 5);
  EXPECT_EQ(s.bos_prepended, 1);  // the second document starts with bos already
  EXPECT_EQ(s.eos_appended, 2);
  EXPECT_GE(s.seconds, 0.0);

  const TokenDataset dataset = TokenDataset::open(o.out, 10);
  ASSERT_EQ(dataset.num_documents(), 2);
  ASSERT_TRUE(dataset.has_loss_mask());
  const Read first = document(dataset, 0);
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{1, 5, 6, 7, 2}));
  EXPECT_EQ(first.mask, (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  const Read second = document(dataset, 1);
  EXPECT_EQ(second.tokens, (std::vector<int32_t>{1, 8, 9, 2}));
  EXPECT_EQ(second.mask, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(dataset.attributes().vocab_size, 10);
  EXPECT_EQ(dataset.attributes().bos_id, 1);
  EXPECT_EQ(dataset.attributes().eos_id, 2);
  EXPECT_EQ(dataset.attributes().created_by, "test_convert");
  expect_contains(dataset.attributes().tokenizer, "unknown (token ids from " + in);
}

TEST(Convert, TextThroughTheTokenizer) {
  TempDir dir;
  const std::string in = dir.file("text.jsonl");
  // The ids HuggingFace gives (tests/tokenizer/tiny_reference.json).
  write_text(in, "{\"text\": \"the quick fox is jumping\"}\n{\"text\": \"\"}\n");
  ConvertOptions o;
  o.in = in;
  o.out = dir.file("text.h5");
  o.schema.vocab_size = 283;
  o.schema.text_field = "text";
  o.tokenizer_path = kTinyTokenizer;
  o.tokenizer_name = "tiny-gpt2";
  const ConvertSummary s = convert_jsonl_to_dataset(o);
  EXPECT_EQ(s.documents, 1);
  EXPECT_EQ(s.skipped_empty, 1);
  EXPECT_FALSE(s.with_mask);

  const TokenDataset dataset = TokenDataset::open(o.out, 283);
  ASSERT_EQ(dataset.num_documents(), 1);
  EXPECT_FALSE(dataset.has_loss_mask());
  EXPECT_EQ(document(dataset, 0).tokens, (std::vector<int32_t>{116, 104, 101, 263, 266, 32, 105,
                                                               115, 32, 106, 117, 109, 112, 268}));
  EXPECT_EQ(dataset.attributes().tokenizer, "tiny-gpt2");
}

TEST(Convert, ErrorsNameTheFileAndLineAndWriteNothing) {
  TempDir dir;
  const std::string in = dir.file("bad.jsonl");
  ConvertOptions o;
  o.in = in;
  o.out = dir.file("out.h5");
  o.schema.vocab_size = 10;

  write_text(in, "{\"input_ids\": [1, 2]}\n{\"input_ids\": [3, 12]}\n");
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }), in + ":2");
  write_text(in, "{\"input_ids\": [1, 2], \"loss_mask\": [1, 1]}\n\n{\"input_ids\": [3]}\n");
  const std::string mixed = usage_error([&] { convert_jsonl_to_dataset(o); });
  expect_contains(mixed, in + ":3: has no loss mask");
  expect_contains(mixed, "but line 1, the first document, had one");
  write_text(in, "\n{\"input_ids\": []}\n");
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }),
                  in + ": no documents to write (2 lines: 1 blank, 1 empty");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"bad.jsonl"});

  write_text(in, "{\"text\": \"caf\xC3\"}\n");
  o.schema.text_field = "text";
  o.tokenizer_path = kTinyTokenizer;
  o.schema.vocab_size = 283;
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }), in + ":1: ");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"bad.jsonl"});
}

TEST(Convert, ChecksOptionsAndOutputBeforeReading) {
  TempDir dir;
  const std::string in = dir.file("in.jsonl");
  write_text(in, "{\"input_ids\": [1, 2]}\n");
  ConvertOptions o;
  o.in = in;
  o.out = dir.file("out.h5");
  o.schema.vocab_size = 5;
  o.eos = 7;
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }),
                  "--eos 7: must be in [-1, vocab_size = 5)");
  o.eos = -1;
  o.append_eos = true;
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }), "--append-eos needs --eos");
  o.append_eos = false;
  o.tokenizer_path = kTinyTokenizer;
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }),
                  "a tokenizer is for text; name the text field with --text-field NAME");
  o.tokenizer_path.clear();

  convert_jsonl_to_dataset(o);
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }),
                  o.out + ": exists; pass --overwrite to replace it");
  o.out = in;
  o.overwrite = true;
  expect_contains(usage_error([&] { convert_jsonl_to_dataset(o); }), in + ": is IN itself");
}

}  // namespace
}  // namespace headroom
