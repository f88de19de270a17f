#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode_text.h"
#include "util/error.h"

namespace headroom {

namespace {

std::string hex_byte(uint8_t b) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

// HF does not take an added token's id from the file: it gives the token
// its vocabulary id when the content is in model.vocab, and otherwise the
// next id after the vocabulary and the added tokens before it, in file order
// (AddedVocabulary::add_tokens); a repeated content is skipped. Files saved
// by HF always agree with that; a hand-edited one whose ids disagree would
// silently get other ids than it says, so it is refused.
std::vector<AddedToken> assign_added_ids(const TokenizerJson& json, const TokenIds& vocab) {
  std::vector<AddedToken> added;
  TokenIds ids;  // content -> id, as HF's added_tokens_map
  const auto vocab_entries = static_cast<int64_t>(vocab.size());
  int64_t max_added = -1;
  for (size_t i = 0; i < json.added_tokens.size(); ++i) {
    const AddedToken& t = json.added_tokens[i];
    if (t.content.empty()) continue;
    int64_t id;
    const bool repeated = ids.count(t.content) > 0;
    if (repeated) {
      id = ids[t.content];
    } else if (auto it = vocab.find(t.content); it != vocab.end()) {
      id = it->second;
    } else if (max_added >= 0) {
      id = max_added >= vocab_entries ? max_added + 1 : vocab_entries;
    } else {
      id = vocab_entries;
    }
    if (id != t.id)
      throw UsageError(json.path + ": added_tokens[" + std::to_string(i) +
                       "].id = " + std::to_string(t.id) + ", but HuggingFace tokenizers gives \"" +
                       t.content + "\" id " + std::to_string(id) +
                       " (its vocabulary id, or the next id after the vocabulary and the added "
                       "tokens before it)");
    if (repeated) continue;
    ids.emplace(t.content, t.id);
    max_added = std::max<int64_t>(max_added, t.id);
    added.push_back(t);
  }
  return added;
}

}  // namespace

struct BpeTokenizer::Impl {
  std::string path;
  bool nfc;
  AddedTokenMatcher raw_tokens;         // normalized = false: matched in the raw text
  AddedTokenMatcher normalized_tokens;  // normalized = true: matched after the normalizer
  PreTokenizer pre_tokenizer;
  BpeModel model;
  TokenIds token_ids;                 // tokenizer.json spelling -> id
  std::vector<std::string> bytes_of;  // id -> the bytes it decodes to
  std::vector<bool> known;            // id -> has a token

  // `text`: what encode() was given, `piece` a view into it.
  void encode_piece(std::string_view text, std::string_view piece,
                    std::vector<int32_t>& ids) const {
    const auto push = [&](int32_t id) { ids.push_back(id); };
    const auto merge = [&](std::string_view word) { model.encode(word, ids); };
    const size_t piece_offset = static_cast<size_t>(piece.data() - text.data());
    const std::string normalized = nfc ? to_nfc(piece) : std::string();
    const std::string_view source = nfc ? std::string_view(normalized) : piece;
    const auto pre_tokenize = [&](std::string_view part) {
      try {
        pre_tokenizer.split(part, merge);
      } catch (const RegexLimitError& e) {
        const size_t at = static_cast<size_t>(part.data() - source.data()) + e.offset();
        if (!nfc) throw RegexLimitError(path + ": " + e.step(), e.reason(), piece_offset + at);
        // NFC moves bytes: name the piece of the text and the place in its normal form.
        throw RegexLimitError(path + ": " + e.step(),
                              e.reason() + " (byte " + std::to_string(at) +
                                  " of the NFC form of the text from this byte on)",
                              piece_offset);
      }
    };
    normalized_tokens.split(source, pre_tokenize, push);
  }
};

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  TokenizerJson json = read_tokenizer_json(path);
  const std::string& file = json.path;
  auto fail = [&](const std::string& key, const std::string& what) -> UsageError {
    return UsageError(file + ": " + key + ": " + what);
  };

  TokenIds vocab;
  vocab.reserve(json.vocab.size());
  int64_t size = 0;
  for (const auto& [token, id] : json.vocab) {
    vocab.emplace(token, id);
    size = std::max<int64_t>(size, int64_t{id} + 1);
  }

  std::array<int32_t, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    const std::string_view symbol = byte_level_char(static_cast<uint8_t>(b));
    auto it = vocab.find(symbol);
    if (it == vocab.end())
      throw fail("model.vocab", "no entry \"" + std::string(symbol) + "\" for byte " +
                                    hex_byte(static_cast<uint8_t>(b)) +
                                    ": a byte-level vocabulary spells every byte");
    byte_ids[static_cast<size_t>(b)] = it->second;
  }

  const std::vector<AddedToken> added = assign_added_ids(json, vocab);
  for (const AddedToken& t : added)
    size = std::max<int64_t>(size, int64_t{t.id} + 1);

  std::vector<BpeModel::Merge> merges;
  merges.reserve(json.merges.size());
  for (size_t i = 0; i < json.merges.size(); ++i) {
    const auto& [left, right] = json.merges[i];
    const std::string merged = left + right;
    auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(merged);
    const std::string* missing = l == vocab.end()   ? &left
                                 : r == vocab.end() ? &right
                                 : m == vocab.end() ? &merged
                                                    : nullptr;
    if (missing)
      throw fail("model.merges[" + std::to_string(i) + "]",
                 "\"" + left + " " + right + "\": \"" + *missing + "\" is not in model.vocab");
    merges.push_back({l->second, r->second, m->second});
  }

  std::optional<PreTokenizer> pre_tokenizer;
  try {
    pre_tokenizer.emplace(json.pre_tokenizer);
  } catch (const UsageError& e) {
    throw fail("pre_tokenizer", e.what());
  }

  // What each id decodes to: its entry spelled back into bytes, or the
  // entry's own UTF-8 when it is not in the byte alphabet (HF's ByteLevel
  // decoder does the same).
  std::vector<std::string> bytes_of(static_cast<size_t>(size));
  std::vector<bool> known(static_cast<size_t>(size), false);
  TokenIds whole_tokens;  // by the bytes they spell, for ignore_merges
  for (const auto& [token, id] : json.vocab) {
    std::optional<std::string> bytes = byte_level_decode(token);
    if (bytes && json.ignore_merges) whole_tokens.emplace(*bytes, id);
    bytes_of[static_cast<size_t>(id)] = bytes ? std::move(*bytes) : token;
    known[static_cast<size_t>(id)] = true;
  }
  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& t : added) {
    bytes_of[static_cast<size_t>(t.id)] = byte_level_decode(t.content).value_or(t.content);
    known[static_cast<size_t>(t.id)] = true;
    (t.normalized ? normalized : raw).push_back(t);
  }
  for (const AddedToken& t : added)
    vocab.insert_or_assign(t.content, t.id);  // HF looks added tokens up first

  return BpeTokenizer(std::make_unique<Impl>(
      Impl{file, json.nfc, AddedTokenMatcher(std::move(raw)),
           AddedTokenMatcher(std::move(normalized)), std::move(*pre_tokenizer),
           BpeModel(byte_ids, merges, std::move(whole_tokens), json.ignore_merges),
           std::move(vocab), std::move(bytes_of), std::move(known)}));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  if (const std::optional<size_t> bad = find_invalid_utf8(text))
    throw UsageError("invalid UTF-8 at byte " + std::to_string(*bad) + " (" +
                     hex_byte(static_cast<uint8_t>(text[*bad])) +
                     "): text must be well-formed UTF-8");
  if (text.size() > INT32_MAX)
    throw UsageError("text of " + std::to_string(text.size()) +
                     " bytes: encode at most 2 GiB at a time");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  impl_->raw_tokens.split(
      text, [&](std::string_view piece) { impl_->encode_piece(text, piece, ids); },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !impl_->known[static_cast<size_t>(id)])
      throw UsageError("id " + std::to_string(id) + " at index " + std::to_string(i) +
                       " has no token in " + impl_->path);
    bytes += impl_->bytes_of[static_cast<size_t>(id)];
  }
  return utf8_lossy(bytes);
}

int64_t BpeTokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->bytes_of.size());
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->token_ids.find(token);
  if (it == impl_->token_ids.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeTokenizer::path() const {
  return impl_->path;
}

}  // namespace headroom
