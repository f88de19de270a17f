#include "tokenizer/tokenizer_json.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_error.h"
#include "util/read_file.h"

namespace headroom {

namespace {

using nlohmann::json;

// Reads keys of one file, naming the file and the key path in every error.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw UsageError(file_ + ": " + key + ": " + what);
  }

  // obj[name], which must exist (and be non-null unless `null_ok`).
  const json& at(const json& obj, const std::string& key, const char* name,
                 bool null_ok = false) const {
    auto it = obj.find(name);
    if (it == obj.end()) fail(join(key, name), "missing");
    if (it->is_null() && !null_ok) fail(join(key, name), "is null");
    return *it;
  }

  // obj[name] as T; `fallback` when absent or null.
  template <typename T>
  T get(const json& obj, const std::string& key, const char* name, T fallback) const {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return fallback;
    return as<T>(*it, join(key, name));
  }

  template <typename T>
  T as(const json& value, const std::string& key) const {
    if constexpr (std::is_same_v<T, bool>) {
      if (!value.is_boolean()) fail(key, "expected true or false, got " + value.dump());
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!value.is_string()) fail(key, "expected a string, got " + value.dump());
    } else if constexpr (std::is_same_v<T, double>) {
      if (!value.is_number()) fail(key, "expected a number, got " + value.dump());
    } else {
      static_assert(std::is_same_v<T, int64_t>);
      if (!value.is_number_integer()) fail(key, "expected an integer, got " + value.dump());
    }
    return value.get<T>();
  }

  const json& object(const json& value, const std::string& key) const {
    if (!value.is_object()) fail(key, "expected an object, got " + kind(value));
    return value;
  }
  const json& array(const json& value, const std::string& key) const {
    if (!value.is_array()) fail(key, "expected an array, got " + kind(value));
    return value;
  }

  static std::string join(const std::string& key, const char* name) {
    return key.empty() ? name : key + "." + name;
  }
  static std::string index(const std::string& key, size_t i) {
    return key + "[" + std::to_string(i) + "]";
  }

 private:
  static std::string kind(const json& value) {
    if (value.is_null()) return "null";
    std::string text = value.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return std::string(value.type_name()) + " " + text;
  }
  std::string file_;
};

std::string type_of(const Reader& r, const json& obj, const std::string& key) {
  return r.as<std::string>(r.at(obj, key, "type"), Reader::join(key, "type"));
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

PreTokenizer::Step byte_level_step(const Reader& r, const json& obj, const std::string& key) {
  PreTokenizer::Step step;
  step.kind = PreTokenizer::Step::Kind::kByteLevel;
  step.add_prefix_space = r.get<bool>(obj, key, "add_prefix_space", true);
  step.use_regex = r.get<bool>(obj, key, "use_regex", true);
  step.key = key;
  return step;  // trim_offsets changes offsets only, never ids
}

PreTokenizer::Step split_step(const Reader& r, const json& obj, const std::string& key) {
  PreTokenizer::Step step;
  step.kind = PreTokenizer::Step::Kind::kSplit;
  step.key = key;
  const std::string pattern_key = Reader::join(key, "pattern");
  const json& pattern = r.object(r.at(obj, key, "pattern"), pattern_key);
  if (pattern.contains("Regex")) {
    step.pattern = r.as<std::string>(pattern["Regex"], pattern_key + ".Regex");
  } else if (pattern.contains("String")) {
    step.pattern = r.as<std::string>(pattern["String"], pattern_key + ".String");
    step.literal = true;
  } else {
    r.fail(pattern_key, "expected {\"Regex\": ...} or {\"String\": ...}");
  }
  const std::string behavior =
      r.as<std::string>(r.at(obj, key, "behavior"), Reader::join(key, "behavior"));
  const bool invert = r.get<bool>(obj, key, "invert", false);
  // Isolated keeps matches and gaps (Qwen2/3, Llama-3); Removed with invert
  // keeps only the matches (GPT-4o's o200k).
  if (behavior == "Removed" && invert) {
    step.keep_gaps = false;
  } else if (behavior != "Isolated") {
    r.fail(Reader::join(key, "behavior"),
           quoted(behavior) + ": only \"Isolated\" (or \"Removed\" with invert) is supported");
  } else if (invert) {
    r.fail(Reader::join(key, "invert"), "true is supported only with behavior \"Removed\"");
  }
  return step;
}

std::vector<PreTokenizer::Step> pre_tokenizer(const Reader& r, const json& root) {
  const std::string key = "pre_tokenizer";
  const json& obj = r.object(r.at(root, "", "pre_tokenizer", true), key);
  const std::string type = type_of(r, obj, key);
  std::vector<PreTokenizer::Step> steps;
  if (type == "ByteLevel") {
    steps.push_back(byte_level_step(r, obj, key));
  } else if (type == "Sequence") {
    const std::string list_key = key + ".pretokenizers";
    const json& list = r.array(r.at(obj, key, "pretokenizers"), list_key);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item_key = Reader::index(list_key, i);
      const json& item = r.object(list[i], item_key);
      const std::string item_type = type_of(r, item, item_key);
      if (!steps.empty() && steps.back().kind == PreTokenizer::Step::Kind::kByteLevel)
        r.fail(item_key, "follows ByteLevel; ByteLevel must be the last pre-tokenizer");
      if (item_type == "Split")
        steps.push_back(split_step(r, item, item_key));
      else if (item_type == "ByteLevel")
        steps.push_back(byte_level_step(r, item, item_key));
      else
        r.fail(item_key + ".type", quoted(item_type) + ": only Split and ByteLevel are supported");
    }
  } else {
    r.fail(key + ".type", quoted(type) +
                              ": only ByteLevel, or a Sequence of Split and ByteLevel, "
                              "is supported");
  }
  if (steps.empty() || steps.back().kind != PreTokenizer::Step::Kind::kByteLevel)
    r.fail(key, "must end with ByteLevel (a byte-level BPE tokenizer)");
  return steps;
}

// `value` as a token id: an integer in [0, kMaxTokenId], else refused by `key`.
int32_t token_id(const Reader& r, const json& value, const std::string& key) {
  const int64_t id = r.as<int64_t>(value, key);
  if (id < 0) r.fail(key, std::to_string(id) + " is not a token id");
  if (id > kMaxTokenId)
    r.fail(key, std::to_string(id) + " is past the largest token id headroom accepts, " +
                    std::to_string(kMaxTokenId) + " (it keeps a table by id)");
  return static_cast<int32_t>(id);
}

void read_model(const Reader& r, const json& root, TokenizerJson& out) {
  const std::string key = "model";
  const json& model = r.object(r.at(root, "", "model"), key);
  const std::string type = r.get<std::string>(model, key, "type", "BPE");
  if (type != "BPE") r.fail(key + ".type", quoted(type) + ": only BPE is supported");
  const double dropout = r.get<double>(model, key, "dropout", 0.0);
  if (dropout != 0.0) r.fail(key + ".dropout", "BPE dropout is random; expected null");
  if (r.get<bool>(model, key, "byte_fallback", false))
    r.fail(key + ".byte_fallback", "true is not supported (SentencePiece-style byte fallback)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!r.get<std::string>(model, key, affix, "").empty())
      r.fail(Reader::join(key, affix), "must be empty or null for byte-level BPE");
  out.ignore_merges = r.get<bool>(model, key, "ignore_merges", false);

  const json& vocab = r.object(r.at(model, key, "vocab"), key + ".vocab");
  out.vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    out.vocab.emplace_back(it.key(),
                           token_id(r, it.value(), key + ".vocab[" + quoted(it.key()) + "]"));
  }

  const std::string merges_key = key + ".merges";
  const json& merges = r.array(r.at(model, key, "merges"), merges_key);
  out.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {  // "a b"
      const std::string& text = m.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        r.fail(Reader::index(merges_key, i), quoted(text) + " is not two tokens \"a b\"");
      out.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      r.fail(Reader::index(merges_key, i),
             "expected \"a b\" or [\"a\", \"b\"], got " + m.dump().substr(0, 60));
    }
  }
}

std::vector<AddedToken> added_tokens(const Reader& r, const json& root) {
  std::vector<AddedToken> tokens;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  const json& list = r.array(*it, "added_tokens");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = Reader::index("added_tokens", i);
    const json& t = r.object(list[i], key);
    AddedToken token;
    token.id = token_id(r, r.at(t, key, "id"), key + ".id");
    token.content = r.as<std::string>(r.at(t, key, "content"), key + ".content");
    token.single_word = r.get<bool>(t, key, "single_word", false);
    token.lstrip = r.get<bool>(t, key, "lstrip", false);
    token.rstrip = r.get<bool>(t, key, "rstrip", false);
    token.normalized = r.get<bool>(t, key, "normalized", true);
    token.special = r.get<bool>(t, key, "special", false);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  std::string file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    file = (std::filesystem::path(path) / "tokenizer.json").string();
  const std::string text = read_regular_file(file, kMaxTokenizerJsonBytes, "tokenizer");
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    throw_json_syntax_error(file, e.what(), e.byte);
  } catch (const json::out_of_range& e) {
    throw_json_number_error(file, e.what());
  }
  const Reader r(file);
  TokenizerJson out;
  out.path = file;
  if (!root.is_object())
    r.fail("(root)", "expected an object, got " + std::string(root.type_name()));

  for (const char* key : {"truncation", "padding"}) {
    auto it = root.find(key);
    if (it != root.end() && !it->is_null())
      r.fail(key, "must be null: encode() returns every id, never truncated or padded");
  }
  const json& normalizer = r.at(root, "", "normalizer", true);
  if (!normalizer.is_null()) {
    const std::string type = type_of(r, r.object(normalizer, "normalizer"), "normalizer");
    if (type != "NFC") r.fail("normalizer.type", quoted(type) + ": only null or NFC is supported");
    out.nfc = true;
  }
  out.pre_tokenizer = pre_tokenizer(r, root);
  const json& decoder = r.object(r.at(root, "", "decoder", true), "decoder");
  const std::string decoder_type = type_of(r, decoder, "decoder");
  if (decoder_type != "ByteLevel")
    r.fail("decoder.type", quoted(decoder_type) + ": only ByteLevel is supported");
  read_model(r, root, out);
  out.added_tokens = added_tokens(r, root);
  return out;
}

}  // namespace headroom
