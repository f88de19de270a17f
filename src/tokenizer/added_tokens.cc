#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode_text.h"

namespace headroom {

namespace {

// Where trailing white space of `text` starts (HF's space_leftmost_at_end).
size_t strip_end(std::string_view text) {
  while (!text.empty() && is_white_space(last_code_point(text))) {
    size_t i = text.size() - 1;
    while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80)
      --i;
    text = text.substr(0, i);
  }
  return text.size();
}

// How many bytes of leading white space `text` has (HF's space_rightmost_at_start).
size_t leading_space(std::string_view text) {
  size_t n = 0;
  while (n < text.size()) {
    const std::string_view rest = text.substr(n);
    const char32_t c = first_code_point(rest);
    if (!is_white_space(c)) break;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  for (AddedToken& t : tokens)
    if (!t.content.empty()) tokens_.push_back(std::move(t));
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (size_t i = 0; i < tokens_.size(); ++i)
    by_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(static_cast<uint32_t>(i));
}

const AddedToken* AddedTokenMatcher::longest_at(std::string_view text, size_t at) const {
  for (uint32_t i : by_byte_[static_cast<uint8_t>(text[at])])  // longest first
    if (text.compare(at, tokens_[i].content.size(), tokens_[i].content) == 0) return &tokens_[i];
  return nullptr;
}

void AddedTokenMatcher::split(std::string_view text,
                              const std::function<void(std::string_view)>& on_text,
                              const std::function<void(int32_t)>& on_token) const {
  size_t emitted = 0;  // text before this is handed on
  size_t pos = 0;      // where the search resumes
  while (pos < text.size()) {
    // The leftmost position where a token matches, and the longest token there.
    const AddedToken* found = nullptr;
    size_t start = pos;
    for (; start < text.size(); ++start)
      if ((found = longest_at(text, start)) != nullptr) break;
    if (!found) break;
    size_t stop = start + found->content.size();
    pos = stop;
    if (found->single_word) {
      const bool space_before =
          start == 0 || !is_alphanumeric(last_code_point(text.substr(0, start)));
      const bool space_after =
          stop == text.size() || !is_alphanumeric(first_code_point(text.substr(stop)));
      if (!space_before || !space_after) continue;
    }
    if (found->lstrip) start = std::max(strip_end(text.substr(0, start)), emitted);
    if (found->rstrip) stop += leading_space(text.substr(stop));
    if (start > emitted) on_text(text.substr(emitted, start - emitted));
    on_token(found->id);
    emitted = stop;  // the search still resumes at the match's own end, as in HF
  }
  if (emitted < text.size()) on_text(text.substr(emitted));
}

}  // namespace headroom
