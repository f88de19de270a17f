// PreTokenizer: cuts normalized text into the pieces BPE merges within, as
// HF's `Split` (Regex or String pattern; behavior Isolated, or Removed with
// invert) and
// `ByteLevel` pre-tokenizers do, alone or as a `Sequence`.
//
//   Split      every match of the pattern is a piece, and so is every gap
//              between matches (behavior Isolated; with Removed + invert the
//              gaps are dropped); empty pieces are dropped. The regex runs in
//              ICU over the UTF-8 text itself (UText), so pieces are byte
//              ranges of the input.
//   ByteLevel  the last step: prepends ' ' to a piece that does not start
//              with one (add_prefix_space), splits it with GPT-2's pattern
//              (use_regex), and hands the pieces on. Its mapping of bytes to
//              printable characters is not done here: BpeModel works on the
//              raw bytes and the vocabulary is keyed by the bytes it spells.
//
// Patterns are written for Oniguruma (HF) and compiled by ICU. The two agree
// on what these tokenizers use: \s is White_Space in both (so U+0085 and
// U+00A0 are spaces), \p{L} / \p{N} are general categories, (?i:...) folds
// case, (?!...) looks ahead. tests/data/test_bpe_tokenizer.cc checks that on
// random text of many scripts against HF's own ids.
//
// Thread-safe: split() makes its own ICU matchers.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

class PreTokenizer {
 public:
  struct Step {
    enum class Kind { kSplit, kByteLevel };
    Kind kind = Kind::kSplit;
    std::string pattern;    // kSplit: the regex, or the literal text when `literal`
    bool literal = false;   // kSplit: a {"String": ...} pattern
    bool keep_gaps = true;  // kSplit: false = drop the text between matches (Removed + invert)
    bool add_prefix_space = false;  // kByteLevel
    bool use_regex = true;          // kByteLevel
  };

  // HF ByteLevel's own pattern (GPT-2's), used when use_regex is true.
  static constexpr const char* kByteLevelPattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

  // `steps` run in order; a ByteLevel step, if any, must be the last. An
  // empty list makes the whole text one piece. A pattern ICU cannot compile
  // is a UsageError "step <i>: <ICU error> at pattern offset <k>".
  explicit PreTokenizer(const std::vector<Step>& steps);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Calls `emit` with each non-empty piece of `text` (well-formed UTF-8), in
  // order. A piece is a view into `text` or into a buffer that lives until
  // `emit` returns.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom
