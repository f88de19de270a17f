// BpeTokenizer against HuggingFace `tokenizers` itself: the ids HF gives
// for the real Qwen3 tokenizer.json (reference.json: named samples,
// sample.txt whole, 560 random strings of many scripts and spaces) and for
// two handmade tokenizers (tiny_*.json: the GPT-2 ByteLevel path,
// add_prefix_space, ignore_merges, lstrip / rstrip / single_word tokens),
// all made by tests/tokenizer/make_reference.mjs. Then the errors, and
// `headroom data tokenize` end to end.
//
// The Qwen3 tokenizer.json (11 MB) is not in the repository:
// scripts/fetch-test-assets.sh (run by scripts/test.sh) puts it at
// testing::qwen3_tokenizer(); the environment variable
// HEADROOM_QWEN3_TOKENIZER overrides the path. Without it the Qwen3 tests
// fail, saying so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util/source_tree.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headroom {
namespace {

const std::string kFixtures = testing::source_dir() + "/tests/tokenizer/";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "headroom-tokenizer-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The UsageError message `action` throws, or a test failure.
std::string usage_error(const std::function<void()>& action) {
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

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "\"" << (text) << "\" lacks \"" << (part) << "\""

// The ids and decoded text of each case of a reference list match HF's.
void expect_matches(const BpeTokenizer& tokenizer, const json& cases, const std::string& what) {
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    const std::string text = c["text"];
    const std::string name =
        what + (c.contains("name") ? " \"" + c["name"].get<std::string>() + "\""
                                   : "[" + std::to_string(i) + "]");
    const std::vector<int32_t> expected = c["ids"];
    const std::vector<int32_t> ids = tokenizer.encode(text);
    if (ids != expected) {
      ++mismatches;
      ADD_FAILURE() << name << ": ids differ from HF's for text " << json(text).dump()
                    << "\n  HF:       " << json(expected).dump()
                    << "\n  headroom: " << json(ids).dump();
      continue;
    }
    // Without a "decoded" entry the text round-trips as it is.
    const std::string decoded = c.contains("decoded") ? c["decoded"].get<std::string>() : text;
    EXPECT_EQ(tokenizer.decode(ids), decoded) << name;
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " " << what;
}

// ----------------------------------------------------------------- Qwen3

class Qwen3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::qwen3_tokenizer();
    if (!fs::exists(path)) return;
    tokenizer_ = new BpeTokenizer(BpeTokenizer::load(path));
    reference_ = new json(read_json(kFixtures + "reference.json"));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete reference_;
    tokenizer_ = nullptr;
    reference_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr)
        << testing::qwen3_tokenizer()
        << " is missing: run scripts/fetch-test-assets.sh (it downloads the Qwen3 tokenizer.json "
           "that these tests compare against HuggingFace's ids)";
  }
  static const BpeTokenizer& tokenizer() { return *tokenizer_; }
  static const json& reference() { return *reference_; }

 private:
  static inline BpeTokenizer* tokenizer_ = nullptr;
  static inline json* reference_ = nullptr;
};

// Each Qwen3 test is a process of its own under ctest and loads the 11 MB
// file again (about 0.6 s, 8 s under ASan), so the checks are grouped.
TEST_F(Qwen3, SamplesAndRandomStringsGiveHuggingFaceIds) {
  expect_matches(tokenizer(), reference()["samples"], "sample");
  expect_matches(tokenizer(), reference()["random"], "random string");
}

TEST_F(Qwen3, VocabularySpecialTokensAndErrors) {
  EXPECT_EQ(tokenizer().vocab_size(), 151669);
  EXPECT_EQ(tokenizer().token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tokenizer().token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tokenizer().token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tokenizer().token_to_id("<think>"), 151667);
  EXPECT_EQ(tokenizer().token_to_id("Ġhello"), 23811);  // byte-level spelling of " hello"
  EXPECT_EQ(tokenizer().token_to_id(" hello"), std::nullopt);
  EXPECT_EQ(tokenizer().encode("<|im_start|>user<|im_end|>"),
            (std::vector<int32_t>{151644, 872, 151645}));
  EXPECT_TRUE(tokenizer().encode("").empty());

  // Decoding ids that cut a character: U+FFFD where HF puts it.
  for (const json& c : reference()["decode"]) {
    const std::vector<int32_t> ids = c["ids"];
    EXPECT_EQ(tokenizer().decode(ids), c["decoded"].get<std::string>()) << json(ids).dump();
  }
  const std::vector<int32_t> bad = {785, 151669};
  EXPECT_CONTAINS(usage_error([&] { tokenizer().decode(bad); }), "id 151669 at index 1");
  const std::vector<int32_t> negative = {-1};
  EXPECT_CONTAINS(usage_error([&] { tokenizer().decode(negative); }), "id -1 at index 0");

  // Ill-formed UTF-8 is refused, naming the byte.
  EXPECT_CONTAINS(usage_error([&] { tokenizer().encode("abc\xff"); }), "invalid UTF-8 at byte 3");
  EXPECT_CONTAINS(usage_error([&] { tokenizer().encode("a\xe6\x97"); }), "at byte 1");  // cut
  EXPECT_CONTAINS(usage_error([&] { tokenizer().encode("\xed\xa0\x80"); }),
                  "at byte 0");                                                        // surrogate
  EXPECT_CONTAINS(usage_error([&] { tokenizer().encode("\xc0\xaf"); }), "at byte 0");  // overlong
  EXPECT_EQ(tokenizer().encode(std::string("a\0b", 3)).size(), 3u);  // NUL is a character
}

// Pathological pre-tokens: the heap merge keeps them O(n log n), and the
// regex's backtracking stack may grow past ICU's default cap.
TEST_F(Qwen3, LongRunsStayFastAndRoundTrip) {
  for (const std::string& text :
       {std::string(500000, ' ') + "x",  // past ICU's default 8 MB backtracking stack
        std::string(100000, 'a'), std::string(50000, '\n'), std::string(30000, '9'), [] {
          std::string s;
          for (int i = 0; i < 20000; ++i)
            s += "语言";
          return s;
        }()}) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer().encode(text);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
#ifdef HEADROOM_SANITIZE
    constexpr double kLimit = 60.0;  // ASan + UBSan run about 10x slower
#else
    constexpr double kLimit = 10.0;     // about 0.1 s each
#endif
    EXPECT_LT(seconds, kLimit) << text.size() << " bytes of '" << text.substr(0, 3) << "'";
    EXPECT_EQ(tokenizer().decode(ids), text);
    EXPECT_LE(ids.size(), text.size());  // Qwen splits digits one by one
  }
}

// ----------------------------------------------------------------- tiny tokenizers

TEST(TinyTokenizers, GiveHuggingFaceIds) {
  const json reference = read_json(kFixtures + "tiny_reference.json");
  for (const std::string name : {"tiny_gpt2", "tiny_prefix"}) {
    SCOPED_TRACE(name);
    const BpeTokenizer tokenizer = BpeTokenizer::load(kFixtures + name + ".json");
    expect_matches(tokenizer, reference["tokenizers"][name], name);
  }
}

TEST(TinyTokenizers, MovedTokenizerStillWorks) {
  BpeTokenizer loaded = BpeTokenizer::load(kFixtures + "tiny_gpt2.json");
  const std::vector<int32_t> ids = loaded.encode("the quick fox");
  BpeTokenizer moved = std::move(loaded);
  EXPECT_EQ(moved.encode("the quick fox"), ids);
  BpeTokenizer assigned = BpeTokenizer::load(kFixtures + "tiny_prefix.json");
  assigned = std::move(moved);
  EXPECT_EQ(assigned.decode(ids), "the quick fox");
  EXPECT_EQ(assigned.path(), kFixtures + "tiny_gpt2.json");
}

// encode() is const and makes its own ICU matchers: threads may share a tokenizer.
TEST(TinyTokenizers, ThreadsShareOneTokenizer) {
  const BpeTokenizer tokenizer = BpeTokenizer::load(kFixtures + "tiny_prefix.json");
  const std::string text = "the cat sat <mask> on e\u0301 <sep> the unmergeable cats | x ";
  const std::vector<int32_t> expected = tokenizer.encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i)
        got[t] = tokenizer.encode(text);
    });
  for (std::thread& thread : threads)
    thread.join();
  for (const std::vector<int32_t>& ids : got)
    EXPECT_EQ(ids, expected);
}

TEST(TinyTokenizers, LoadsFromAFolder) {
  TempDir dir;
  fs::copy_file(kFixtures + "tiny_gpt2.json", dir / "tokenizer.json");
  const BpeTokenizer tokenizer = BpeTokenizer::load(dir.path().string());
  EXPECT_EQ(tokenizer.path(), (dir / "tokenizer.json").string());
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("the quick fox")), "the quick fox");
}

// ----------------------------------------------------------------- errors

class BadTokenizerJson : public ::testing::Test {
 protected:
  // The load error of tiny_gpt2.json after `edit`.
  std::string error_after(const std::function<void(json&)>& edit) {
    json j = read_json(kFixtures + "tiny_gpt2.json");
    edit(j);
    write(dir_ / "t.json", j.dump());
    return usage_error([&] { BpeTokenizer::load((dir_ / "t.json").string()); });
  }
  std::string file() const { return (dir_ / "t.json").string(); }
  TempDir dir_;
};

TEST_F(BadTokenizerJson, MissingFileNamesIt) {
  const std::string path = (dir_ / "nope.json").string();
  const std::string e = usage_error([&] { BpeTokenizer::load(path); });
  EXPECT_CONTAINS(e, path);
  EXPECT_CONTAINS(e, "No such file or directory");
}

TEST_F(BadTokenizerJson, InvalidJsonNamesTheByte) {
  write(dir_ / "t.json", "{\"model\": {\"type\": \"BPE\",, }}");
  const std::string e = usage_error([&] { BpeTokenizer::load(file()); });
  EXPECT_CONTAINS(e, file() + ": JSON syntax error at byte 26 (line 1, column 26): ");
}

TEST_F(BadTokenizerJson, NamesTheKey) {
  EXPECT_CONTAINS(error_after([](json& j) { j.erase("model"); }), file() + ": model: missing");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"].erase("merges"); }),
                  "model.merges: missing");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["vocab"] = json::array(); }),
                  "model.vocab: expected an object");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["vocab"]["!"] = "x"; }),
                  "model.vocab[\"!\"]: expected an integer");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["merges"][2] = "abc"; }),
                  "model.merges[2]: \"abc\" is not two tokens");
  EXPECT_CONTAINS(error_after([](json& j) {
                    j["model"]["merges"][0] = {"Ġ", "zz"};
                  }),
                  "model.merges[0]: \"Ġ zz\": \"zz\" is not in model.vocab");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["vocab"].erase("Ċ"); }),
                  "model.vocab: no entry \"Ċ\" for byte 0x0A");
  EXPECT_CONTAINS(error_after([](json& j) { j["added_tokens"][0].erase("content"); }),
                  "added_tokens[0].content: missing");
  EXPECT_CONTAINS(error_after([](json& j) { j["added_tokens"][0]["lstrip"] = 1; }),
                  "added_tokens[0].lstrip: expected true or false");
  // An id sizes the table by id: one huge id asked the fuzzer for 4 GiB.
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["vocab"]["!"] = int64_t{1} << 22; }),
                  "model.vocab[\"!\"]: 4194304 is past the largest token id headroom accepts, "
                  "4194303 (it keeps a table by id)");
  EXPECT_CONTAINS(error_after([](json& j) { j["added_tokens"][0]["id"] = 133333333; }),
                  "added_tokens[0].id: 133333333 is past the largest token id");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["vocab"]["!"] = -1; }),
                  "model.vocab[\"!\"]: -1 is not a token id");
  EXPECT_CONTAINS(error_after([](json& j) { j["added_tokens"][0]["id"] = 5; }),
                  "added_tokens[0].id = 5, but HuggingFace tokenizers gives \"<|endoftext|>\" id");
}

TEST_F(BadTokenizerJson, RefusesWhatItCannotReproduce) {
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["type"] = "WordPiece"; }),
                  file() + ": model.type: \"WordPiece\": only BPE is supported");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["byte_fallback"] = true; }),
                  "model.byte_fallback");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["dropout"] = 0.1; }), "model.dropout");
  EXPECT_CONTAINS(error_after([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
                  "model.continuing_subword_prefix");
  EXPECT_CONTAINS(error_after([](json& j) {
                    j["normalizer"] = {{"type", "NFKC"}};
                  }),
                  "normalizer.type: \"NFKC\": only null or NFC");
  EXPECT_CONTAINS(error_after([](json& j) {
                    j["pre_tokenizer"] = {{"type", "Metaspace"}};
                  }),
                  "pre_tokenizer.type: \"Metaspace\"");
  EXPECT_CONTAINS(error_after([](json& j) {
                    j["decoder"] = {{"type", "Metaspace"}};
                  }),
                  "decoder.type: \"Metaspace\": only ByteLevel");
  EXPECT_CONTAINS(error_after([](json& j) {
                    j["truncation"] = {{"max_length", 8}};
                  }),
                  "truncation: must be null");
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", "\\s+"}}},
                      {"behavior", "Removed"},
                      {"invert", false}};
  EXPECT_CONTAINS(
      error_after([&](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, j["pre_tokenizer"]}}};
      }),
      "pre_tokenizer.pretokenizers[0].behavior: \"Removed\"");
  EXPECT_CONTAINS(
      error_after([&](json& j) {
        json bad = split;
        bad["behavior"] = "Isolated";
        bad["pattern"] = {{"Regex", "(unclosed"}};
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {bad, j["pre_tokenizer"]}}};
      }),
      "pre_tokenizer: step 0: U_REGEX_MISMATCHED_PAREN");
  EXPECT_CONTAINS(
      error_after([&](json& j) {
        json ok = split;
        ok["behavior"] = "Isolated";
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {j["pre_tokenizer"], ok}}};
      }),
      "pre_tokenizer.pretokenizers[1]: follows ByteLevel");
}

// ----------------------------------------------------------------- hostile input

#ifdef HEADROOM_SANITIZE
constexpr double kGiveUpSeconds = 60.0;  // ASan + UBSan run about 10x slower
#else
constexpr double kGiveUpSeconds = 5.0;  // about 0.4 s
#endif

// (a*)*b backtracks 2^n ways on n a's: ICU's time limit stops it, and the
// error names the step, its pattern and the byte it was stuck at.
TEST(RegexLimits, ACatastrophicPatternGivesUpQuickly) {
  PreTokenizer::Step split;
  split.pattern = "(a*)*b";
  split.key = "pre_tokenizer.pretokenizers[0]";
  const PreTokenizer pre({split});
  const std::string text = "xy " + std::string(30, 'a');
  const auto start = std::chrono::steady_clock::now();
  try {
    pre.split(text, [](std::string_view) {});
    ADD_FAILURE() << "the split finished";
  } catch (const RegexLimitError& e) {
    EXPECT_EQ(e.offset(), 3u);
    EXPECT_CONTAINS(e.what(),
                    "pre_tokenizer.pretokenizers[0] (Split regex \"(a*)*b\"): gave up "
                    "matching at byte 3: the regex exceeded its time limit of 1000 ticks");
    EXPECT_CONTAINS(e.what(), "U_REGEX_TIME_OUT");
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            kGiveUpSeconds);
}

TEST_F(BadTokenizerJson, ACatastrophicSplitNamesTheFileStepAndByte) {
  json j = read_json(kFixtures + "tiny_gpt2.json");
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", "(a*)*b"}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          j["pre_tokenizer"]}}};
  write(dir_ / "t.json", j.dump());
  const BpeTokenizer tokenizer = BpeTokenizer::load(file());
  const auto start = std::chrono::steady_clock::now();
  const std::string e = usage_error([&] { tokenizer.encode("the fox " + std::string(30, 'a')); });
  EXPECT_CONTAINS(e, file() +
                         ": pre_tokenizer.pretokenizers[0] (Split regex \"(a*)*b\"): gave "
                         "up matching at byte 8: ");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            kGiveUpSeconds);
}

TEST_F(BadTokenizerJson, OnlyARegularFileOfBoundedSizeIsRead) {
  EXPECT_CONTAINS(usage_error([&] { BpeTokenizer::load("/dev/zero"); }),
                  "/dev/zero: tokenizer is a character device: expected a regular file");
  fs::create_directories(dir_ / "folder" / "tokenizer.json");
  EXPECT_CONTAINS(usage_error([&] { BpeTokenizer::load((dir_ / "folder").string()); }),
                  "folder/tokenizer.json: tokenizer is a directory");
  // Sparse: 257 MiB on paper, nothing on disk.
  const fs::path huge = dir_ / "huge.json";
  write(huge, "{");
  fs::resize_file(huge, 257u << 20);
  EXPECT_CONTAINS(usage_error([&] { BpeTokenizer::load(huge.string()); }),
                  "huge.json: tokenizer is 257.0 MiB (269484032 B); at most 256.0 MiB "
                  "(268435456 B) of a tokenizer is read");
}

// ----------------------------------------------------------------- the CLI

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

class TokenizeCli : public ::testing::Test {
 protected:
  CliResult run(const std::string& args, const std::string& stdin_file = "") {
    const std::string command =
        "cd '" + dir_.path().string() + "' && '" + testing::headroom_binary() + "' data tokenize " +
        args + (stdin_file.empty() ? "" : " < '" + stdin_file + "'") + " > out.txt 2> err.txt";
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "out.txt"),
            slurp(dir_ / "err.txt")};
  }
  TempDir dir_;
};

TEST_F(TokenizeCli, EncodesSampleTxtLikeHuggingFace) {
  if (!fs::exists(testing::qwen3_tokenizer()))
    FAIL() << testing::qwen3_tokenizer() << " is missing: run scripts/fetch-test-assets.sh";
  const json reference = read_json(kFixtures + "reference.json");
  json expected, decoded;
  for (const json& c : reference["samples"])
    if (c["name"] == "sample_txt") expected = c["ids"], decoded = c.value("decoded", c["text"]);
  CliResult r = run("--tokenizer '" + testing::qwen3_tokenizer() + "' '" + kFixtures +
                    "sample.txt' --json --stats");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), expected);
  EXPECT_CONTAINS(r.err, "tokens/s");

  // The ids back to text, through standard input (each run loads the 11 MB
  // file: two runs only).
  write(dir_ / "ids.json", r.out);
  CliResult text = run("--tokenizer '" + testing::qwen3_tokenizer() + "' --decode -",
                       (dir_ / "ids.json").string());
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out, decoded.get<std::string>());
}

TEST_F(TokenizeCli, PlainIdsAndJsonArraysRoundTrip) {
  const std::string tiny = "--tokenizer '" + kFixtures + "tiny_gpt2.json' ";
  write(dir_ / "a.txt", "The fox");
  CliResult ids = run(tiny + "a.txt");
  ASSERT_EQ(ids.code, 0) << ids.err;
  const BpeTokenizer tokenizer = BpeTokenizer::load(kFixtures + "tiny_gpt2.json");
  std::string expected;
  for (int32_t id : tokenizer.encode("The fox"))
    expected += (expected.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(ids.out, expected + "\n");
  write(dir_ / "ids.txt", ids.out);
  CliResult text = run(tiny + "--decode ids.txt");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out, "The fox");

  write(dir_ / "ids.json", "[84, 104,101]");
  CliResult json_text = run(tiny + "--decode ids.json");
  ASSERT_EQ(json_text.code, 0) << json_text.err;
  EXPECT_EQ(json_text.out, "The");
}

TEST_F(TokenizeCli, BadTokenizerPathIsAUsageError) {
  write(dir_ / "a.txt", "hello");
  CliResult r = run("--tokenizer /no/such/tokenizer.json a.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "/no/such/tokenizer.json");
  CliResult missing = run("a.txt");
  EXPECT_EQ(missing.code, 2);
  EXPECT_CONTAINS(missing.err, "--tokenizer");
}

TEST_F(TokenizeCli, IllFormedInputNamesFileAndByte) {
  write(dir_ / "bad.txt", "ok\n\xff");
  CliResult r = run("--tokenizer '" + kFixtures + "tiny_gpt2.json' bad.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "bad.txt: invalid UTF-8 at byte 3");
  write(dir_ / "ids.txt", "1 2 x3");
  CliResult ids = run("--tokenizer '" + kFixtures + "tiny_gpt2.json' --decode ids.txt");
  EXPECT_EQ(ids.code, 2);
  EXPECT_CONTAINS(ids.err, "ids.txt: byte 4: \"x3\" is not a token id");
}

TEST_F(TokenizeCli, HelpDescribesTheTool) {
  CliResult r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_CONTAINS(r.out, "--tokenizer");
  EXPECT_CONTAINS(r.out, "--decode");
}

TEST_F(TokenizeCli, AFolderOrDeviceIsNotText) {
  const std::string tiny = "--tokenizer '" + kFixtures + "tiny_gpt2.json' ";
  fs::create_directories(dir_ / "texts");
  CliResult folder = run(tiny + "texts");
  EXPECT_EQ(folder.code, 2) << folder.err;
  EXPECT_CONTAINS(folder.err, "texts: text to tokenize is a directory: expected a regular file");
  EXPECT_EQ(folder.out, "");
  CliResult zero = run(tiny + "/dev/zero");
  EXPECT_EQ(zero.code, 2) << zero.err;
  EXPECT_CONTAINS(zero.err, "/dev/zero: text to tokenize is a character device");
  CliResult tokenizer = run("--tokenizer /dev/zero texts");
  EXPECT_EQ(tokenizer.code, 2) << tokenizer.err;
  EXPECT_CONTAINS(tokenizer.err, "/dev/zero: tokenizer is a character device");
}

TEST_F(TokenizeCli, DecodeParsesIdsStrictly) {
  const std::string tiny = "--tokenizer '" + kFixtures + "tiny_gpt2.json' --decode ids.txt";
  for (const auto& [ids, expected] : std::vector<std::pair<std::string, std::string>>{
           {"[72, 101,", "ids.txt: byte 9: expected a token id, got the end of the input"},
           {"[72, 101", "ids.txt: byte 8: expected ',' or ']', got the end of the input"},
           {"[72,, 101]", "ids.txt: byte 4: expected a token id, got \","},
           {"[72] 5", "ids.txt: byte 5: expected nothing after the array's ']'"},
           {"72 101,", "ids.txt: byte 7: expected a token id after ','"},
           {",72", "ids.txt: byte 0: expected a token id, got \","},
           {"72 ]", "ids.txt: byte 3: expected a token id, got \"]"},
           {"72x", "ids.txt: byte 0: \"72x\" is not a token id"},
           {"99999999999999999999", "ids.txt: byte 0: 99999999999999999999 is not a token id"},
           {"[-1]", "ids.txt: byte 1: -1 is not a token id"},
       }) {
    SCOPED_TRACE(ids);
    write(dir_ / "ids.txt", ids);
    CliResult r = run(tiny);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_CONTAINS(r.err, expected);
    EXPECT_EQ(r.out, "");
  }
  for (const char* ids : {"84 104 101", "84,104, 101\n", " [ 84 ,104,101 ] \n", "", "[]"}) {
    SCOPED_TRACE(ids);
    write(dir_ / "ids.txt", ids);
    CliResult r = run(tiny);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, std::string(ids).empty() || std::string(ids) == "[]" ? "" : "The");
  }
}

}  // namespace
}  // namespace headroom
