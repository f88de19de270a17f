// `headroom data convert` end to end: the real binary in a scratch folder,
// JSONL in, the HDF5 dataset read back token by token, every error checked
// for its message and for leaving nothing behind.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "data/token_dataset.h"
#include "test_util/source_tree.h"
#include "test_util/temporaries.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headroom {
namespace {

using testing::Result;
using testing::slurp;

struct Document {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;  // empty: the record has none
};

// One JSONL line for `d`; masks alternate between 0/1 and false/true, and
// some records carry fields the converter must ignore.
std::string jsonl_line(const Document& d, size_t index) {
  std::string line = "{";
  if (index % 3 == 0)
    line += "\"id\": " + std::to_string(index) + ", \"meta\": {\"input_ids\": []}, ";
  line += "\"input_ids\": [";
  for (size_t i = 0; i < d.ids.size(); ++i)
    line += (i ? ", " : "") + std::to_string(d.ids[i]);
  line += "]";
  if (!d.mask.empty() || (d.ids.empty() && index % 2 == 0)) {
    line += ", \"loss_mask\": [";
    for (size_t i = 0; i < d.mask.size(); ++i) {
      line += i ? ", " : "";
      line += index % 2 ? (d.mask[i] ? "true" : "false") : (d.mask[i] ? "1" : "0");
    }
    line += "]";
  }
  return line + "}";
}

class DataConvert : public testing::ScratchFolder {
 protected:
  // `headroom data <args>` in the scratch folder; `input` (a file there) as
  // standard input when given.
  Result run(const std::string& args, const std::string& input = "") {
    return run_headroom("data " + args + (input.empty() ? "" : " < '" + input + "'"));
  }
  void write_gzip(const std::string& name, const std::string& text) {
    gzFile gz = gzopen((dir_ / name).c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Nothing at OUT, and no temporary beside it either.
  void expect_nothing_written(const std::string& name) {
    EXPECT_FALSE(fs::exists(dir_ / name)) << name;
    EXPECT_TRUE(testing::temporaries_of(dir_ / name).empty()) << name;
  }
  // ~`tokens` random ids in documents of up to 2000 tokens, as JSONL.
  std::string big_corpus(int64_t tokens, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string text;
    for (int64_t n = 0; n < tokens;) {
      Document d;
      d.ids.resize(1 + rng() % 2000);
      for (int32_t& id : d.ids)
        id = static_cast<int32_t>(rng() % 32000);
      n += static_cast<int64_t>(d.ids.size());
      text += jsonl_line(d, 1) + "\n";
    }
    return text;
  }
};

TEST_F(DataConvert, RoundTripKeepsEveryTokenAndMaskValue) {
  // Empty, short, medium and long documents (one longer than the reader's
  // 1 MiB buffer and the writer's 1 Mi-token flush together), blank lines.
  std::mt19937_64 rng(20261129);
  std::vector<Document> documents;
  for (int d = 0; d < 400; ++d) {
    const uint64_t kind = rng() % 20;
    const size_t length = kind < 2    ? 0
                          : kind < 14 ? 1 + rng() % 200
                          : kind < 19 ? 200 + rng() % 5000
                                      : 1 + rng() % 30;
    Document doc;
    doc.ids.resize(d == 123 ? 400000 : length);
    doc.mask.resize(doc.ids.size());
    for (size_t i = 0; i < doc.ids.size(); ++i) {
      doc.ids[i] = static_cast<int32_t>(rng() % 50000);
      doc.mask[i] = rng() % 4 != 0;
    }
    documents.push_back(std::move(doc));
  }
  std::string text;
  int64_t blank = 0, empty = 0, tokens = 0, targets = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    if (d % 50 == 7) {
      text += "\n";
      ++blank;
    }
    text += jsonl_line(documents[d], d) + "\n";
    empty += documents[d].ids.empty();
    tokens += static_cast<int64_t>(documents[d].ids.size());
    for (uint8_t m : documents[d].mask)
      targets += m;
  }
  write("in.jsonl", text);

  Result r =
      run("convert in.jsonl out.h5 --vocab 50000 --eos 2 --bos 1 "
          "--tokenizer-name 'Qwen/Qwen3-8B test' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json summary = json::parse(r.out);
  const int64_t kept = static_cast<int64_t>(documents.size()) - empty;
  EXPECT_EQ(summary["documents"], kept);
  EXPECT_EQ(summary["tokens"], tokens);
  EXPECT_EQ(summary["skipped_empty"], empty);
  EXPECT_EQ(summary["dropped_short"], 0);
  EXPECT_EQ(summary["blank_lines"], blank);
  EXPECT_EQ(summary["lines"], static_cast<int64_t>(documents.size()) + blank);
  EXPECT_EQ(summary["bytes"], static_cast<int64_t>(text.size()));
  EXPECT_TRUE(summary["loss_mask"]["present"].get<bool>());
  EXPECT_EQ(summary["loss_mask"]["targets_kept"], targets);
  EXPECT_GT(summary["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(summary["peak_rss_bytes"].get<int64_t>(), 0);

  // Every token and mask value, through the reader training uses (which
  // validates the whole file first).
  const TokenDataset dataset = TokenDataset::open(path("out.h5"), 50000);
  ASSERT_EQ(dataset.num_documents(), kept);
  ASSERT_EQ(dataset.num_tokens(), tokens);
  ASSERT_TRUE(dataset.has_loss_mask());
  std::vector<int32_t> read_tokens;
  std::vector<uint8_t> read_mask;
  int64_t index = 0;
  for (const Document& d : documents) {
    if (d.ids.empty()) continue;
    dataset.read_document(index, read_tokens, read_mask);
    ASSERT_EQ(read_tokens, d.ids) << "document " << index;
    ASSERT_EQ(read_mask, d.mask) << "document " << index;
    ++index;
  }
  const TokenDatasetAttributes& a = dataset.attributes();
  EXPECT_EQ(a.vocab_size, 50000);
  EXPECT_EQ(a.eos_id, 2);
  EXPECT_EQ(a.bos_id, 1);
  EXPECT_EQ(a.tokenizer, "Qwen/Qwen3-8B test");
  EXPECT_EQ(a.created_by.rfind("headroom ", 0), 0u) << a.created_by;
  EXPECT_NE(a.created_by.find("data convert in.jsonl out.h5 --vocab 50000"), std::string::npos)
      << a.created_by;
  EXPECT_FALSE(a.source_entropy_nats.has_value());

  Result inspect = run("inspect out.h5 --json");
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  const json j = json::parse(inspect.out);
  EXPECT_EQ(j["documents"], kept);
  EXPECT_EQ(j["tokens"], tokens);
  EXPECT_EQ(j["loss_mask"]["targets_kept"], targets);
  EXPECT_EQ(j["lengths"]["p100"], 400000);

  Result plain = run("convert in.jsonl plain.h5 --vocab 50000");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_NE(plain.out.find("wrote plain.h5: " + std::to_string(kept) + " documents, " +
                           std::to_string(tokens) + " tokens, vocab 50000"),
            std::string::npos)
      << plain.out;
  EXPECT_NE(plain.out.find(std::to_string(empty) + " empty documents"), std::string::npos)
      << plain.out;
  EXPECT_NE(plain.out.find("tokens/s"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("MB/s"), std::string::npos) << plain.out;
}

TEST_F(DataConvert, EosBosMinTokensAndNoMask) {
  write("in.jsonl",
        "{\"input_ids\": [3, 4, 5]}\n"
        "{\"input_ids\": [7, 8, 9]}\n"  // ends with eos already
        "{\"input_ids\": [0, 4, 5]}\n"  // starts with bos already
        "{\"input_ids\": [5]}\n"        // 3 tokens with bos and eos: dropped
        "{\"input_ids\": []}\n");       // empty: skipped, never just [bos, eos]
  Result r =
      run("convert in.jsonl out.h5 --vocab 10 --eos 9 --bos 0 --append-eos --prepend-bos "
          "--min-tokens 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(r.out);
  EXPECT_EQ(s["documents"], 3);
  EXPECT_EQ(s["tokens"], 13);
  EXPECT_EQ(s["skipped_empty"], 1);
  EXPECT_EQ(s["dropped_short"], 1);
  EXPECT_EQ(s["eos_appended"], 2);
  EXPECT_EQ(s["bos_prepended"], 2);
  EXPECT_FALSE(s["loss_mask"]["present"].get<bool>());
  EXPECT_EQ(s["loss_mask"]["coverage"], 1.0);

  const TokenDataset dataset = TokenDataset::open(path("out.h5"), 10);
  EXPECT_FALSE(dataset.has_loss_mask());
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  const std::vector<std::vector<int32_t>> expected = {{0, 3, 4, 5, 9}, {0, 7, 8, 9}, {0, 4, 5, 9}};
  for (int64_t d = 0; d < 3; ++d) {
    dataset.read_document(d, tokens, mask);
    EXPECT_EQ(tokens, expected[static_cast<size_t>(d)]);
    EXPECT_TRUE(mask.empty());
  }

  // With a mask: an added bos is not a target, an added eos is.
  write("masked.jsonl", "{\"input_ids\": [3, 4], \"loss_mask\": [0, 0]}\n");
  ASSERT_EQ(run("convert masked.jsonl masked.h5 --vocab 10 --eos 9 --bos 0 --append-eos "
                "--prepend-bos")
                .code,
            0);
  TokenDataset::open(path("masked.h5"), 10).read_document(0, tokens, mask);
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 3, 4, 9}));
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 0, 1}));
}

TEST_F(DataConvert, HuggingFaceLabelsBecomeTheLossMask) {
  write("in.jsonl",
        "{\"input_ids\": [5, 6, 7, 8], \"labels\": [-100, -100, 7, 8]}\n"
        "{\"input_ids\": [1, 2], \"labels\": [1, 2], \"attention_mask\": [1, 1]}\n");
  Result r = run("convert in.jsonl out.h5 --vocab 10 --labels-field labels --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["loss_mask"]["targets_kept"], 4);
  const TokenDataset dataset = TokenDataset::open(path("out.h5"), 10);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  dataset.read_document(0, tokens, mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 1, 1}));
  dataset.read_document(1, tokens, mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 1}));
}

TEST_F(DataConvert, GzipAndStandardInputGiveTheSameDataset) {
  const std::string text =
      "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4]}\n\n{\"input_ids\": [5, 6]}";
  write("in.jsonl", text);
  write_gzip("in.jsonl.gz", text);
  write_gzip("in.gz.jsonl", text);  // compressed whatever the name
  ASSERT_EQ(run("convert in.jsonl plain.h5 --vocab 10").code, 0);
  Result gz = run("convert in.jsonl.gz gz.h5 --vocab 10 --json");
  ASSERT_EQ(gz.code, 0) << gz.err;
  EXPECT_EQ(json::parse(gz.out)["bytes"], static_cast<int64_t>(text.size()));
  ASSERT_EQ(run("convert in.gz.jsonl named.h5 --vocab 10").code, 0);
  Result in = run("convert - stdin.h5 --vocab 10 --json", "in.jsonl");
  ASSERT_EQ(in.code, 0) << in.err;
  EXPECT_EQ(json::parse(in.out)["input"], "<stdin>");
  ASSERT_EQ(run("convert - stdin_gz.h5 --vocab 10", "in.jsonl.gz").code, 0);

  const TokenDataset reference = TokenDataset::open(path("plain.h5"), 10);
  ASSERT_EQ(reference.num_documents(), 3);
  for (const char* name : {"gz.h5", "named.h5", "stdin.h5", "stdin_gz.h5"}) {
    SCOPED_TRACE(name);
    const TokenDataset other = TokenDataset::open(path(name), 10);
    ASSERT_EQ(other.num_documents(), 3);
    std::vector<int32_t> a, b;
    std::vector<uint8_t> ma, mb;
    for (int64_t d = 0; d < 3; ++d) {
      reference.read_document(d, a, ma);
      other.read_document(d, b, mb);
      EXPECT_EQ(a, b);
    }
  }

  Result err = run("convert - out.h5 --vocab 3", "in.jsonl");
  EXPECT_EQ(err.code, 2);
  EXPECT_NE(err.err.find("<stdin>:1: input_ids[2] = 3 is outside [0, vocab_size = 3)"),
            std::string::npos)
      << err.err;
  expect_nothing_written("out.h5");
}

TEST_F(DataConvert, EachBadLineIsAUsageErrorNamingFileLineFieldAndIndex) {
  struct Case {
    const char* line;
    const char* options;
    const char* message;  // after "bad.jsonl:3: "
  };
  const Case cases[] = {
      {"{\"input_ids\": [4, 5", "", "invalid JSON at byte 20: syntax error while parsing array"},
      {"not json", "", "invalid JSON at byte 2: syntax error while parsing value"},
      {"{\"tokens\": [4, 5]}", "", "missing field \"input_ids\" (the record has \"tokens\")"},
      {"{\"input_ids\": [4, 5.5]}", "",
       "input_ids[1] = 5.5: expected an integer token id in [0, vocab_size = 10)"},
      {"{\"input_ids\": [4, \"5\"]}", "", "input_ids[1] = \"5\": expected an integer token id"},
      {"{\"input_ids\": [4, 5, 10]}", "", "input_ids[2] = 10 is outside [0, vocab_size = 10)"},
      {"{\"input_ids\": [-4]}", "", "input_ids[0] = -4 is outside [0, vocab_size = 10)"},
      {"{\"input_ids\": [4, 5], \"loss_mask\": [1, 1, 0]}", "",
       "loss_mask has 3 entries but input_ids has 2: they must align one to one"},
      {"{\"input_ids\": [4, 5], \"loss_mask\": [1, 2]}", "",
       "loss_mask[1] = 2: expected 0 or 1 (or false/true)"},
      {"{\"input_ids\": [4, 5], \"labels\": [4, 6]}", "--labels-field labels",
       "labels[1] = 6 but input_ids[1] = 5: a label must be -100 (not a target) or the token id"},
      // The first document (line 1) has no mask, so none may.
      {"{\"input_ids\": [4], \"loss_mask\": [1]}", "",
       "has a loss mask (loss_mask) but line 1, the first document, had none"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    write("bad.jsonl",
          std::string("{\"input_ids\": [1, 2]}\n\n") + c.line + "\n{\"input_ids\": [3]}\n");
    Result r = run(std::string("convert bad.jsonl out.h5 --vocab 10 ") + c.options);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(std::string("bad.jsonl:3: ") + c.message), std::string::npos) << r.err;
    expect_nothing_written("out.h5");
  }

  write("mixed.jsonl", "{\"input_ids\": [1], \"loss_mask\": [1]}\n{\"input_ids\": [2]}\n");
  Result r = run("convert mixed.jsonl out.h5 --vocab 10 --labels-field labels");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("mixed.jsonl:2: has no loss mask (loss_mask or labels) but line 1, the "
                       "first document, had one"),
            std::string::npos)
      << r.err;
  expect_nothing_written("out.h5");

  write("nothing.jsonl", "\n{\"input_ids\": []}\n{\"input_ids\": [1]}\n");
  r = run("convert nothing.jsonl out.h5 --vocab 10 --min-tokens 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nothing.jsonl: no documents to write (3 lines: 1 blank, 1 empty, 1 "
                       "shorter than --min-tokens 2)"),
            std::string::npos)
      << r.err;
  expect_nothing_written("out.h5");

  // Far into the file, after the writer has flushed tokens to its temporary.
  write("late.jsonl", big_corpus(1500000, 1) + "{\"input_ids\": [1, 32000]}\n");
  r = run("convert late.jsonl out.h5 --vocab 32000");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("input_ids[1] = 32000 is outside [0, vocab_size = 32000)"),
            std::string::npos)
      << r.err;
  expect_nothing_written("out.h5");
}

TEST_F(DataConvert, AnExistingOutputIsReplacedOnlyWithOverwriteAndOnlyOnSuccess) {
  write("a.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  write("b.jsonl", "{\"input_ids\": [4]}\n{\"input_ids\": [5]}\n");
  ASSERT_EQ(run("convert a.jsonl out.h5 --vocab 10").code, 0);
  const std::string before = slurp(dir_ / "out.h5");

  Result r = run("convert b.jsonl out.h5 --vocab 10");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("out.h5: exists; pass --overwrite to replace it"), std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(dir_ / "out.h5"), before);

  // Failures with --overwrite: a bad line at the end of a file large enough
  // to have been flushed, a missing input, a bad option.
  write("late.jsonl", big_corpus(1200000, 2) + "{\"input_ids\": [1, 2],\n");
  for (const char* args : {"convert late.jsonl out.h5 --vocab 32000 --overwrite",
                           "convert missing.jsonl out.h5 --vocab 10 --overwrite",
                           "convert b.jsonl out.h5 --vocab 10 --eos 10 --overwrite"}) {
    SCOPED_TRACE(args);
    r = run(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(slurp(dir_ / "out.h5"), before) << "an existing OUT is untouched by a failure";
    EXPECT_TRUE(testing::temporaries_of(dir_ / "out.h5").empty());
  }

  r = run("convert b.jsonl out.h5 --vocab 10 --overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(dir_ / "out.h5"), before);
  EXPECT_EQ(TokenDataset::open(path("out.h5"), 10).num_documents(), 2);
  EXPECT_TRUE(testing::temporaries_of(dir_ / "out.h5").empty());
}

// Text through Qwen3's tokenizer.json gives HuggingFace's ids, as recorded
// in tests/tokenizer/reference.json by HF's own tokenizer.
TEST_F(DataConvert, TextThroughTheTokenizerGivesHuggingFacesIds) {
  const std::string tokenizer = testing::qwen3_tokenizer();
  ASSERT_TRUE(fs::exists(tokenizer))
      << tokenizer << " is missing: run scripts/fetch-test-assets.sh";
  const nlohmann::json reference = nlohmann::json::parse(
      slurp(fs::path(testing::source_dir()) / "tests/tokenizer/reference.json"));
  std::vector<std::vector<int32_t>> expected;
  {
    std::ofstream out(dir_ / "text.jsonl");
    for (const nlohmann::json& sample : reference["samples"]) {
      if (sample["ids"].empty()) continue;
      out << nlohmann::json{{"text", sample["text"]}, {"source", "reference"}}.dump() << "\n";
      expected.push_back(sample["ids"].get<std::vector<int32_t>>());
      if (expected.size() == 12) break;
    }
  }
  Result r =
      run("convert text.jsonl text.h5 --vocab 151936 --text-field text --tokenizer " + tokenizer);
  ASSERT_EQ(r.code, 0) << r.err;
  const TokenDataset dataset = TokenDataset::open((dir_ / "text.h5").string(), 151936);
  EXPECT_EQ(dataset.attributes().tokenizer, tokenizer);
  ASSERT_EQ(dataset.num_documents(), static_cast<int64_t>(expected.size()));
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (size_t d = 0; d < expected.size(); ++d) {
    dataset.read_document(static_cast<int64_t>(d), tokens, mask, 0);
    EXPECT_EQ(tokens, expected[d]) << "document " << d;
  }

  // Invalid UTF-8 names the record it is in.
  std::ofstream(dir_ / "bad.jsonl") << "{\"text\": \"fine\"}\n{\"text\": \"\xff\"}\n";
  r = run("convert bad.jsonl bad.h5 --vocab 151936 --text-field text --tokenizer " + tokenizer);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.jsonl:2"), std::string::npos) << r.err;
  expect_nothing_written("bad.h5");
}

TEST_F(DataConvert, BadOptionsAreUsageErrorsNamingThem) {
  write("a.jsonl", "{\"input_ids\": [1, 2, 3], \"text\": \"hi\"}\n");
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"a.jsonl out.h5", "--vocab"},
      {"a.jsonl --vocab 10", "missing OUT.h5"},
      {"a.jsonl out.h5 --vocab 0", "--vocab 0: must be in [1, 2^31]"},
      {"a.jsonl out.h5 --vocab 10 --append-eos", "--append-eos needs --eos ID"},
      {"a.jsonl out.h5 --vocab 10 --prepend-bos", "--prepend-bos needs --bos ID"},
      {"a.jsonl out.h5 --vocab 10 --bos 10", "--bos 10: must be in [-1, vocab_size = 10)"},
      {"a.jsonl out.h5 --vocab 10 --min-tokens -1", "--min-tokens -1: must be at least 0"},
      {"a.jsonl out.h5 --vocab 10 --labels-field loss_mask",
       "--labels-field loss_mask is also --mask-field"},
      {"a.jsonl out.h5 --vocab 10 --text-field text", "--text-field text needs --tokenizer T.json"},
      {"a.jsonl out.h5 --vocab 10 --text-field text --tokenizer t.json", "t.json"},
      {"a.jsonl out.h5 --vocab 10 --tokenizer t.json", "name the text field with --text-field"},
      {"missing.jsonl out.h5 --vocab 10", "missing.jsonl: cannot open: No such file or directory"},
      {"a.jsonl nowhere/out.h5 --vocab 10", "nowhere/out.h5: no such folder nowhere"},
      {"a.jsonl a.jsonl --vocab 10 --overwrite", "a.jsonl: is IN itself"},
      {"a.jsonl out.h5 --vocab 10 --frobnicate", "frobnicate"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    Result r = run(std::string("convert ") + c.args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    expect_nothing_written("out.h5");
  }
  EXPECT_EQ(slurp(dir_ / "a.jsonl"), "{\"input_ids\": [1, 2, 3], \"text\": \"hi\"}\n");

  Result help = run("convert --help");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("usage: headroom data convert IN.jsonl OUT.h5 --vocab N"),
            std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("--ids-field"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace headroom
