// BpeTokenizer: the byte-level BPE tokenizers of Qwen2/Qwen3, Llama-3 and
// GPT-2, loaded from a HuggingFace tokenizer.json, giving exactly the ids HF
// `tokenizers` gives for encode(text, add_special_tokens=False).
//
// The pipeline, as HF runs it (each stage in its own file):
//   1. added tokens with normalized = false are cut out of the raw text
//      (added_tokens.h): <|im_start|> in the text is one id;
//   2. each remaining piece is normalized: nothing, or NFC (ICU);
//   3. added tokens with normalized = true are cut out of the result;
//   4. the pre-tokenizer splits each piece (pre_tokenizer.h): a Split regex
//      run by ICU and/or ByteLevel's own regex and add_prefix_space;
//   5. BPE merges the bytes of each piece by merge rank (bpe_model.h).
// decode() maps each id to the bytes its vocabulary entry spells in the
// byte-level alphabet (byte_level.h) and reads the result as UTF-8,
// replacing ill-formed bytes with U+FFFD, as HF's ByteLevel decoder does.
//
// What a tokenizer.json may hold (anything else is refused, see load()):
//   normalizer     null or NFC
//   pre_tokenizer  ByteLevel, or Sequence of Split (Regex or String pattern,
//                  behavior Isolated, or Removed with invert as in GPT-4o)
//                  ending with ByteLevel
//   model          BPE with vocab and merges ("a b" strings or [a, b]
//                  pairs), ignore_merges, no dropout, no byte_fallback, no
//                  continuing_subword_prefix / end_of_word_suffix; every byte
//                  must have a vocabulary entry (so unk_token is never used)
//   added_tokens   any, with single_word / lstrip / rstrip / normalized
//   decoder        ByteLevel
//   truncation, padding  null
//   post_processor ignored: it only adds special tokens (BOS for Llama-3)
//                  when add_special_tokens = True, and this encode is the
//                  add_special_tokens = False one; callers add BOS / EOS
//                  themselves (token_to_id("<|endoftext|>")).
//
// Text must be well-formed UTF-8: HF takes a Rust &str (Python str), so it
// never sees ill-formed bytes, and a silent U+FFFD would hide a bad corpus.
// encode() refuses it with a UsageError naming the byte offset.
//
// Thread-safe: all methods are const; encode() may run on many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

class BpeTokenizer {
 public:
  // Loads `path`: a tokenizer.json, or a folder holding one. A missing file,
  // invalid JSON ("<file>: invalid JSON at byte <n>: ..."), a missing or
  // mistyped key, and anything this class cannot reproduce exactly (a model
  // other than BPE, an unsupported normalizer / pre-tokenizer / decoder,
  // byte_fallback, dropout, truncation, ...) is a UsageError
  // "<file>: <key>: <what>", e.g. "t.json: model.type = "WordPiece": only
  // BPE is supported".
  static BpeTokenizer load(const std::string& path);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // The ids of `text`, as HF's encode(text, add_special_tokens=False): added
  // and special tokens written in the text are recognised and become their
  // own id. Ill-formed UTF-8 is a UsageError "invalid UTF-8 at byte <n> ...";
  // a pre-tokenizer regex past its limits (pre_tokenizer.h) is a
  // RegexLimitError "<tokenizer.json>: <step> (Split regex "..."): gave up
  // matching at byte <k> ...", offset() the byte of `text`.
  std::vector<int32_t> encode(std::string_view text) const;

  // The text of `ids` (special tokens included, as their content), as HF's
  // decode(ids, skip_special_tokens=False). Bytes that do not form UTF-8
  // (a character cut between ids) become U+FFFD. An id with no token is a
  // UsageError naming it and its index. decode(encode(x)) == NFC(x) for an
  // NFC tokenizer, x for the others.
  std::string decode(std::span<const int32_t> ids) const;

  // The largest id plus one, added tokens included: the embedding rows a
  // model needs at least.
  int64_t vocab_size() const;

  // The id of a vocabulary entry, spelled as in tokenizer.json (byte-level:
  // "Ġthe" for " the"), or of an added token ("<|im_end|>"); nullopt if none.
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // The tokenizer.json this was loaded from.
  const std::string& path() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom
