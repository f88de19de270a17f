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
// case, (?!...) looks ahead. tests/tokenizer/test_bpe_tokenizer.cc checks that on
// random text of many scripts against HF's own ids.
//
// ICU's matcher backtracks, so a pattern like (a*)*b takes exponential time
// on "aaaa...": every regex runs under two limits, both scaled to the piece
// it splits, so that such a pattern fails instead of running for ever while
// real tokenizers never come near them:
//   time   kRegexTicksFloor + kRegexTicksPerKiB per KiB of the piece, in
//          ICU's unit (a tick is 10,000 backtracking states saved; about a
//          millisecond on a catastrophic pattern). Qwen3's and GPT-2's
//          patterns use at most 1.7 ticks per KiB (measured on runs of
//          digits, spaces, newlines, punctuation, CJK and mixed text), so 32
//          is a margin of about 20; the floor gives up on a small piece in
//          about a second.
//   stack  the backtracking stack may grow to kRegexStackBytesPerByte per
//          byte of the piece, at least ICU's default 8 MiB and at most
//          2 GiB (ICU takes an int32): a run of white space needs about 40
//          bytes per byte (500,000 spaces pass ICU's default; HF's
//          Oniguruma has no cap), so one run of more than ~50 million
//          spaces is refused.
// Beyond either, split() throws RegexLimitError.
//
// Thread-safe: split() makes its own ICU matchers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.h"

namespace headroom {

// A regex of a pre-tokenizer step gave up (time or backtracking stack limit,
// see above): "<step>: gave up matching at byte <offset>: <reason>". offset()
// is the byte of split()'s text where the match being searched for began, so
// that a caller can name the place in its own input.
class RegexLimitError : public UsageError {
 public:
  RegexLimitError(std::string step, std::string reason, size_t offset)
      : UsageError(step + ": gave up matching at byte " + std::to_string(offset) + ": " + reason),
        step_(std::move(step)),
        reason_(std::move(reason)),
        offset_(offset) {}
  // pre_tokenizer.pretokenizers[0] (Split regex "...")
  const std::string& step() const { return step_; }
  const std::string& reason() const { return reason_; }
  size_t offset() const { return offset_; }

 private:
  std::string step_;
  std::string reason_;
  size_t offset_;
};

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
    std::string key;                // where it came from, for errors: "pre_tokenizer"
  };

  static constexpr int32_t kRegexTicksFloor = 1000;
  static constexpr int32_t kRegexTicksPerKiB = 32;
  static constexpr int64_t kRegexStackBytesPerByte = 256;

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
  // `emit` returns. A regex past its limits is a RegexLimitError.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom
