// AddedTokenMatcher: finds added tokens (special tokens such as
// <|im_start|>, and other added tokens such as <think>) in text the way HF's
// AddedVocabulary does before pre-tokenization, so that they become one id
// each and never reach the BPE model.
//
// Matching is leftmost-longest and non-overlapping, like the Aho-Corasick
// automaton HF builds: at the leftmost position where any token matches, the
// longest one wins, and the search resumes after it. Then, per match:
//   single_word  the match is dropped (and the search still resumes after it)
//                unless neither neighbouring character is alphanumeric;
//   lstrip       white space before it joins the token (not taking back what
//                an earlier match took);
//   rstrip       white space after it joins the token.
//
// HF runs this twice: tokens with normalized = false on the raw text, then
// tokens with normalized = true on each remaining piece after the
// normalizer; BpeTokenizer makes one matcher for each set.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

class AddedTokenMatcher {
 public:
  // Tokens with empty content never match.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Calls on_text(piece) for each non-empty stretch of `text` (well-formed
  // UTF-8) between matches and on_token(id) for each match, in order.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

 private:
  // The longest token that `text` holds at byte `at`, or null.
  const AddedToken* longest_at(std::string_view text, size_t at) const;

  std::vector<AddedToken> tokens_;                  // longest first
  std::array<std::vector<uint32_t>, 256> by_byte_;  // first byte -> tokens_ indices, longest first
};

}  // namespace headroom
