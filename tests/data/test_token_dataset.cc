// TokenDataset validation (every refusal names the file, the dataset and the
// first bad index) and the writer/reader round trip.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/token_dataset.h"
#include "data/token_dataset_writer.h"
#include "data_test_util.h"
#include "test_util/temporaries.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::expect_contains;
using testing::RawDataset;
using testing::TempDir;
using testing::temporaries_of;
using testing::usage_error;

// Writes `raw` and returns the UsageError that opening it raises.
std::string open_error(const TempDir& dir, const RawDataset& raw, int64_t model_vocab = 100) {
  const std::string path = dir.file("bad.h5");
  raw.write(path);
  return usage_error([&] { TokenDataset::open(path, model_vocab); });
}

// ---- the file itself ---------------------------------------------------------

TEST(TokenDatasetErrors, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("nope.h5");
  std::string message = usage_error([&] { TokenDataset::open(path, 100); });
  expect_contains(message, path + ": cannot open token dataset");
  expect_contains(message, "No such file");
}

TEST(TokenDatasetErrors, NotHdf5AndQuiet) {
  TempDir dir;
  const std::string path = dir.file("train.jsonl");
  std::ofstream(path) << "{\"text\": \"not tokens\"}\n";
  ::testing::internal::CaptureStderr();
  std::string message = usage_error([&] { TokenDataset::open(path, 100); });
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "HDF5 printed its error stack";
  expect_contains(message, path + ": not an HDF5 file");
}

TEST(TokenDatasetErrors, MissingDatasets) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.write_tokens = false;
  expect_contains(open_error(dir, raw), "bad.h5: missing dataset /tokens");
  raw = RawDataset::with_lengths({3, 4});
  raw.write_offsets = false;
  expect_contains(open_error(dir, raw), "bad.h5: missing dataset /offsets");
}

// ---- dtypes and shapes -------------------------------------------------------

TEST(TokenDatasetErrors, WrongDtypes) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.tokens_type = H5T_STD_I64LE;
  expect_contains(open_error(dir, raw), "bad.h5: /tokens has dtype int64; expected int32");
  raw.tokens_type = H5T_STD_U32LE;
  expect_contains(open_error(dir, raw), "bad.h5: /tokens has dtype uint32; expected int32");
  raw.tokens_type = H5T_IEEE_F32LE;
  expect_contains(open_error(dir, raw), "bad.h5: /tokens has dtype float32; expected int32");

  raw = RawDataset::with_lengths({3, 4});
  raw.offsets_type = H5T_STD_I32LE;
  expect_contains(open_error(dir, raw), "bad.h5: /offsets has dtype int32; expected int64");

  raw = RawDataset::with_lengths({3, 4});
  raw.loss_mask = std::vector<uint8_t>(7, 1);
  raw.mask_type = H5T_STD_I8LE;
  expect_contains(open_error(dir, raw), "bad.h5: /loss_mask has dtype int8; expected uint8");
}

TEST(TokenDatasetErrors, BigEndianInt32IsStillInt32) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.tokens_type = H5T_STD_I32BE;
  const std::string path = dir.file("be.h5");
  raw.write(path);
  TokenDataset dataset = TokenDataset::open(path, 100);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  dataset.read_document(1, tokens, mask);
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 4, 7, 10}));
}

TEST(TokenDatasetErrors, TokensNotOneDimensional) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({4, 4});
  raw.tokens_2d = true;
  expect_contains(open_error(dir, raw), "bad.h5: /tokens has 2 dimensions; expected 1");
}

// ---- offsets -----------------------------------------------------------------

TEST(TokenDatasetErrors, OffsetsEmpty) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({});
  raw.offsets.clear();
  expect_contains(open_error(dir, raw), "bad.h5: /offsets is empty");
}

TEST(TokenDatasetErrors, OffsetsMustStartAtZero) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.offsets[0] = 1;
  expect_contains(open_error(dir, raw), "bad.h5: /offsets[0] = 1: offsets must start at 0");
}

TEST(TokenDatasetErrors, OffsetsMustNotDecrease) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4, 2, 5, 1});
  raw.offsets[3] = 6;  // 0 3 7 [6] 14 15: the first bad index is 3, not the later one
  raw.offsets[4] = 2;
  std::string message = open_error(dir, raw);
  EXPECT_EQ(message,
            dir.file("bad.h5") + ": /offsets[3] = 6 < /offsets[2] = 7: offsets must not decrease");
}

TEST(TokenDatasetErrors, OffsetPastTheTokens) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4, 3});
  raw.offsets[2] = 50;
  raw.offsets[3] = 60;
  EXPECT_EQ(
      open_error(dir, raw),
      dir.file("bad.h5") + ": /offsets[2] = 50 > 10, the length of /tokens: offset out of range");
}

TEST(TokenDatasetErrors, LastOffsetShortOfTheTokens) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4, 3});
  raw.offsets[3] = 8;
  EXPECT_EQ(open_error(dir, raw), dir.file("bad.h5") +
                                      ": /offsets[3] = 8 != 10, the length of /tokens: the last "
                                      "offset must equal it");
}

// ---- token ids ---------------------------------------------------------------

TEST(TokenDatasetErrors, TokenPastTheModelVocabularyInALaterSlab) {
  // Past the first 1M-token validation slab, so the index arithmetic across
  // slabs is what is being checked.
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({1 << 20, 1000, 300});
  raw.attributes["vocab_size"] = int64_t{5000};
  const int64_t bad = (1 << 20) + 1000 + 17;  // document 2, position 17
  raw.tokens[static_cast<size_t>(bad)] = 4321;
  raw.tokens[static_cast<size_t>(bad) + 5] = 4999;  // a later one must not be the one reported
  EXPECT_EQ(open_error(dir, raw, 4000),
            dir.file("bad.h5") +
                ": /tokens[1049593] = 4321 >= 4000, the model's vocab_size: token "
                "id out of range (tokenized for another model?) (document 2, "
                "position 17)");
}

TEST(TokenDatasetErrors, NegativeToken) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.tokens[4] = -7;
  EXPECT_EQ(open_error(dir, raw), dir.file("bad.h5") +
                                      ": /tokens[4] = -7 < 0: token ids must not be negative "
                                      "(document 1, position 1)");
}

TEST(TokenDatasetErrors, TokenPastTheFilesOwnVocabulary) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 0, 4});  // an empty document in between
  raw.tokens[3] = 150;
  std::string message = open_error(dir, raw, 200);
  expect_contains(message, "bad.h5: /tokens[3] = 150 >= 100, the file's vocab_size attribute");
  expect_contains(message, "(document 2, position 0)");
  // model_vocab = 0 (no model yet) still checks against the file's vocab_size.
  expect_contains(open_error(dir, raw, 0), "/tokens[3] = 150 >= 100, the file's vocab_size");
}

TEST(TokenDatasetErrors, LossMaskLengthMismatch) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.loss_mask = std::vector<uint8_t>(6, 1);
  EXPECT_EQ(open_error(dir, raw), dir.file("bad.h5") +
                                      ": /loss_mask has 6 entries but /tokens has 7: they must "
                                      "align one to one");
}

// ---- attributes --------------------------------------------------------------

TEST(TokenDatasetErrors, MissingAttributes) {
  for (const char* name :
       {"format_version", "vocab_size", "eos_id", "bos_id", "tokenizer", "created_by"}) {
    TempDir dir;
    RawDataset raw = RawDataset::with_lengths({3, 4});
    raw.attributes.erase(name);
    expect_contains(open_error(dir, raw), std::string("bad.h5: missing attribute ") + name);
  }
}

TEST(TokenDatasetErrors, BadAttributes) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.attributes["format_version"] = int64_t{2};
  expect_contains(open_error(dir, raw),
                  "bad.h5: format_version = 2; this build reads format_version 1");

  raw = RawDataset::with_lengths({3, 4});
  raw.attributes["vocab_size"] = std::string("32000");
  expect_contains(open_error(dir, raw),
                  "bad.h5: attribute vocab_size has dtype string; expected an integer");

  raw = RawDataset::with_lengths({3, 4});
  raw.attributes["vocab_size"] = int64_t{0};
  expect_contains(open_error(dir, raw), "bad.h5: vocab_size = 0: expected 1..2^31");

  raw = RawDataset::with_lengths({3, 4});
  raw.attributes["eos_id"] = int64_t{100};
  expect_contains(open_error(dir, raw), "bad.h5: eos_id = 100 is outside [-1, vocab_size = 100)");

  raw = RawDataset::with_lengths({3, 4});
  raw.attributes["tokenizer"] = int64_t{7};
  expect_contains(open_error(dir, raw),
                  "bad.h5: attribute tokenizer has dtype int64; expected a string");

  raw = RawDataset::with_lengths({3, 4});
  raw.attributes["source_entropy_nats"] = -0.5;
  expect_contains(open_error(dir, raw), "bad.h5: source_entropy_nats = -0.5");
}

TEST(TokenDataset, OpensAFileWrittenByAnotherTool) {
  // Contiguous datasets and fixed-length strings, as h5py with numpy 'S'
  // attributes would write; an integer entropy is still a number.
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 0, 4});
  raw.loss_mask = std::vector<uint8_t>{0, 1, 1, 1, 0, 1, 1};
  raw.attributes["source_entropy_nats"] = int64_t{2};
  raw.attributes["eos_id"] = int64_t{99};
  const std::string path = dir.file("h5py.h5");
  raw.write(path);
  TokenDataset dataset = TokenDataset::open(path, 128);
  EXPECT_EQ(dataset.num_documents(), 3);
  EXPECT_EQ(dataset.num_tokens(), 7);
  EXPECT_EQ(dataset.document_length(1), 0);
  EXPECT_EQ(dataset.attributes().tokenizer, "test");
  EXPECT_EQ(dataset.attributes().eos_id, 99);
  EXPECT_EQ(dataset.attributes().source_entropy_nats, 2.0);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  dataset.read_document(2, tokens, mask);
  EXPECT_EQ(tokens, (std::vector<int32_t>{2, 5, 8, 11}));
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 1, 1}));
  dataset.read_document(1, tokens, mask);
  EXPECT_TRUE(tokens.empty());
  EXPECT_TRUE(mask.empty());
}

// ---- writer ------------------------------------------------------------------

TokenDatasetAttributes sample_attributes() {
  TokenDatasetAttributes a;
  a.vocab_size = 50000;
  a.eos_id = 49999;
  a.bos_id = 0;
  a.tokenizer = "byte-level BPE (test) — ünïcode survives";
  a.created_by = "test_token_dataset";
  a.source_entropy_nats = 1.2345678901234567;
  return a;
}

TEST(TokenDatasetWriter, RoundTripAcrossFlushesWithMask) {
  TempDir dir;
  const std::string path = dir.file("train.h5");
  std::mt19937_64 rng(7);
  std::vector<std::vector<int32_t>> documents;
  std::vector<std::vector<uint8_t>> masks;
  int64_t total = 0;
  // More than one writer flush (1M tokens) and more than one offsets flush.
  while (total < (int64_t{1} << 20) + 300000) {
    const int64_t length = static_cast<int64_t>(rng() % 40);  // includes empty documents
    std::vector<int32_t> doc(static_cast<size_t>(length));
    for (int32_t& token : doc)
      token = static_cast<int32_t>(rng() % 50000);
    std::vector<uint8_t> mask;
    if (rng() % 2 == 0) {  // half the documents carry a mask, the rest get all ones
      mask.resize(doc.size());
      for (uint8_t& m : mask)
        m = static_cast<uint8_t>(rng() % 2);
    }
    documents.push_back(doc);
    masks.push_back(mask.empty() ? std::vector<uint8_t>(doc.size(), 1) : mask);
    total += length;
  }
  {
    TokenDatasetWriter writer(path, sample_attributes(), /*with_loss_mask=*/true);
    for (size_t d = 0; d < documents.size(); ++d) {
      const bool own_mask = masks[d] != std::vector<uint8_t>(documents[d].size(), 1);
      writer.append_document(
          documents[d], own_mask ? std::span<const uint8_t>(masks[d]) : std::span<const uint8_t>());
    }
    EXPECT_EQ(writer.num_tokens(), total);
    EXPECT_EQ(writer.num_documents(), static_cast<int64_t>(documents.size()));
    EXPECT_FALSE(std::filesystem::exists(path)) << "visible before finish()";
    writer.finish();
  }
  EXPECT_TRUE(temporaries_of(path).empty());

  TokenDataset dataset = TokenDataset::open(path, 50000);
  EXPECT_EQ(dataset.attributes(), sample_attributes());
  ASSERT_EQ(dataset.num_documents(), static_cast<int64_t>(documents.size()));
  EXPECT_EQ(dataset.num_tokens(), total);
  EXPECT_TRUE(dataset.has_loss_mask());
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (size_t d = 0; d < documents.size(); ++d) {
    dataset.read_document(static_cast<int64_t>(d), tokens, mask);
    ASSERT_EQ(tokens, documents[d]) << "document " << d;
    ASSERT_EQ(mask, masks[d]) << "document " << d;
  }
  // A prefix read (what truncation to max_sample_tokens uses).
  size_t longest = 0;
  for (size_t d = 0; d < documents.size(); ++d)
    if (documents[d].size() > documents[longest].size()) longest = d;
  dataset.read_document(static_cast<int64_t>(longest), tokens, mask, 5);
  EXPECT_EQ(tokens,
            std::vector<int32_t>(documents[longest].begin(), documents[longest].begin() + 5));
  EXPECT_EQ(mask.size(), 5u);
}

TEST(TokenDatasetWriter, WithoutMaskOrEntropy) {
  TempDir dir;
  const std::string path = dir.file("plain.h5");
  TokenDatasetAttributes attributes = sample_attributes();
  attributes.source_entropy_nats.reset();
  TokenDatasetWriter writer(path, attributes);
  writer.append_document(std::vector<int32_t>{1, 2, 3});
  writer.attributes().created_by = "changed before finish";
  writer.finish();
  TokenDataset dataset = TokenDataset::open(path, 0);
  EXPECT_FALSE(dataset.has_loss_mask());
  EXPECT_FALSE(dataset.attributes().source_entropy_nats.has_value());
  EXPECT_EQ(dataset.attributes().created_by, "changed before finish");
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask{9};
  dataset.read_document(0, tokens, mask);
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(mask.empty());
}

TEST(TokenDatasetWriter, AbandonedWriterLeavesNothing) {
  TempDir dir;
  const std::string path = dir.file("partial.h5");
  {
    TokenDatasetWriter writer(path, sample_attributes());
    writer.append_document(std::vector<int32_t>{1, 2, 3});
    EXPECT_EQ(temporaries_of(path).size(), 1u);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(temporaries_of(path).empty());
}

TEST(TokenDatasetWriter, FinishReplacesAnExistingFileWhole) {
  TempDir dir;
  const std::string path = dir.file("train.h5");
  for (int32_t generation : {1, 2}) {
    TokenDatasetWriter writer(path, sample_attributes());
    writer.append_document(std::vector<int32_t>{generation});
    writer.finish();
  }
  TokenDataset dataset = TokenDataset::open(path, 50000);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  dataset.read_document(0, tokens, mask);
  EXPECT_EQ(tokens, std::vector<int32_t>{2});
}

TEST(TokenDatasetWriter, RefusesBadDocuments) {
  TempDir dir;
  TokenDatasetWriter plain(dir.file("a.h5"), sample_attributes());
  expect_contains(usage_error([&] {
                    plain.append_document(std::vector<int32_t>{1, 50000});
                  }),
                  "a.h5: document 0, position 1: token 50000 is outside [0, vocab_size = 50000)");
  expect_contains(usage_error([&] { plain.append_document(std::vector<int32_t>{-1}); }),
                  "token -1 is outside");
  expect_contains(
      usage_error([&] { plain.append_document(std::vector<int32_t>{1}, std::vector<uint8_t>{1}); }),
      "a.h5: document 0 has a loss mask, but the writer was made without /loss_mask");
  TokenDatasetWriter masked(dir.file("b.h5"), sample_attributes(), true);
  expect_contains(usage_error([&] {
                    masked.append_document(std::vector<int32_t>{1, 2}, std::vector<uint8_t>{1});
                  }),
                  "b.h5: document 0: loss mask has 1 entries for 2 tokens");
  TokenDatasetAttributes no_vocab = sample_attributes();
  no_vocab.vocab_size = 0;
  expect_contains(usage_error([&] { TokenDatasetWriter(dir.file("c.h5"), no_vocab); }),
                  "c.h5: vocab_size = 0");
  TokenDatasetWriter bad_eos(dir.file("d.h5"), sample_attributes());
  bad_eos.attributes().eos_id = 50000;
  expect_contains(usage_error([&] { bad_eos.finish(); }), "d.h5: eos_id = 50000 is outside");
}

// ---- loss_mask values and what there is to learn -----------------------------

TEST(TokenDatasetErrors, LossMaskValuesAreZeroOrOne) {
  TempDir dir;
  RawDataset raw = RawDataset::with_lengths({3, 4});
  raw.loss_mask = std::vector<uint8_t>{1, 1, 1, 0, 0, 7, 1};
  expect_contains(open_error(dir, raw),
                  "bad.h5: /loss_mask[5] = 7 (document 1, position 2): expected 0 (not a "
                  "target) or 1 (a target)");
}

// Opens `raw` (which must be valid) and returns check_trainable's error.
std::string trainable_error(const TempDir& dir, const RawDataset& raw, int64_t truncate_at = 0) {
  const std::string path = dir.file("t.h5");
  raw.write(path);
  const TokenDataset dataset = TokenDataset::open(path, 100);
  return usage_error([&] { dataset.check_trainable(truncate_at); });
}

TEST(TokenDatasetErrors, NothingToLearnIsRefusedNamingTheFile) {
  TempDir dir;
  expect_contains(trainable_error(dir, RawDataset::with_lengths({})),
                  "t.h5: no documents (/offsets = [0]): nothing to train on");
  expect_contains(trainable_error(dir, RawDataset::with_lengths({0, 0, 0})),
                  "t.h5: all 3 documents are empty");
  expect_contains(trainable_error(dir, RawDataset::with_lengths({1, 0, 1})),
                  "t.h5: no document has 2 or more tokens: nothing to train on");
  // A mask is 0 wherever a target could be: only a document's first token
  // (which is never a target) is 1.
  RawDataset zero = RawDataset::with_lengths({3, 2});
  zero.loss_mask = std::vector<uint8_t>{1, 0, 0, 1, 0};
  expect_contains(trainable_error(dir, zero), "t.h5: /loss_mask is 0 at every token that could");
  // Cut to their first 2 tokens, documents whose first target is token 2 keep none.
  RawDataset late = RawDataset::with_lengths({4, 5});
  late.loss_mask = std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0, 1, 1};
  expect_contains(trainable_error(dir, late, 2),
                  "t.h5: documents cut to their first 2 tokens (data.max_sample_tokens, or "
                  "seq_len in padded mode) keep no target: the earliest target of any document "
                  "is its token 2");
}

TEST(TokenDataset, CountsTheTargetsTheBatcherTrainsOn) {
  TempDir dir;
  const std::string path = dir.file("ok.h5");
  RawDataset raw = RawDataset::with_lengths({4, 1, 0, 3});
  raw.write(path);
  TokenDataset plain = TokenDataset::open(path, 100);
  EXPECT_EQ(plain.num_targets(), 3 + 0 + 0 + 2);
  plain.check_trainable();
  plain.check_trainable(2);
  raw.loss_mask = std::vector<uint8_t>{1, 0, 1, 1, /**/ 1, /**/ 0, 1, 0};
  raw.write(dir.file("masked.h5"));
  TokenDataset masked = TokenDataset::open(dir.file("masked.h5"), 100);
  EXPECT_EQ(masked.num_targets(), 2 + 1);
  masked.check_trainable(2);  // document 3's token 1 is a target
  expect_contains(usage_error([&] { masked.check_trainable(1); }), "first 1 tokens");
}

}  // namespace
}  // namespace headroom
