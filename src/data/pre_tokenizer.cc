#include "data/pre_tokenizer.h"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include "util/error.h"

namespace headroom {

namespace {

struct CompiledStep {
  PreTokenizer::Step::Kind kind;
  std::unique_ptr<icu::RegexPattern> pattern;  // null: no regex split in this step
  bool add_prefix_space = false;
  bool keep_gaps = true;
};

std::unique_ptr<icu::RegexPattern> compile(const std::string& text, bool literal, size_t step) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  const icu::UnicodeString pattern = icu::UnicodeString::fromUTF8(text);
  std::unique_ptr<icu::RegexPattern> compiled(
      icu::RegexPattern::compile(pattern, literal ? UREGEX_LITERAL : 0, where, status));
  if (U_FAILURE(status))
    throw UsageError("step " + std::to_string(step) + ": " + u_errorName(status) +
                     " at pattern offset " + std::to_string(where.offset));
  return compiled;
}

// Calls `emit` with the matches of `matcher` in `text` and, with
// `keep_gaps`, the gaps between them (HF's SplitDelimiterBehavior::Isolated),
// skipping empty pieces.
template <typename Emit>
void split_matches(icu::RegexMatcher& matcher, std::string_view text, bool keep_gaps, Emit&& emit) {
  UErrorCode status = U_ZERO_ERROR;
  UText utext = UTEXT_INITIALIZER;
  utext_openUTF8(&utext, text.data(), static_cast<int64_t>(text.size()), &status);
  struct Close {
    UText* text;
    ~Close() { utext_close(text); }
  } close{&utext};  // also when `emit` throws
  matcher.reset(&utext);
  int64_t previous = 0;
  while (matcher.find(status)) {
    const int64_t start = matcher.start64(status);
    const int64_t end = matcher.end64(status);
    if (U_FAILURE(status)) break;
    if (keep_gaps && start > previous)
      emit(text.substr(static_cast<size_t>(previous), static_cast<size_t>(start - previous)));
    if (end > start)
      emit(text.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)));
    previous = end;
  }
  if (U_FAILURE(status))  // e.g. U_REGEX_STACK_OVERFLOW on a pathological input
    throw InternalError(std::string("ICU regex: ") + u_errorName(status));
  if (keep_gaps && static_cast<size_t>(previous) < text.size())
    emit(text.substr(static_cast<size_t>(previous)));
}

}  // namespace

struct PreTokenizer::Impl {
  std::vector<CompiledStep> steps;

  void run(std::vector<std::unique_ptr<icu::RegexMatcher>>& matchers, size_t step,
           std::string_view piece, const std::function<void(std::string_view)>& emit) const {
    if (step == steps.size()) {
      emit(piece);
      return;
    }
    const CompiledStep& s = steps[step];
    std::string prefixed;
    if (s.add_prefix_space && piece[0] != ' ') {
      prefixed.reserve(piece.size() + 1);
      prefixed += ' ';
      prefixed += piece;
      piece = prefixed;
    }
    if (!s.pattern) {
      run(matchers, step + 1, piece, emit);
      return;
    }
    split_matches(*matchers[step], piece, s.keep_gaps,
                  [&](std::string_view part) { run(matchers, step + 1, part, emit); });
  }
};

PreTokenizer::PreTokenizer(const std::vector<Step>& steps) : impl_(std::make_unique<Impl>()) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.kind == Step::Kind::kByteLevel && i + 1 != steps.size())
      throw UsageError("step " + std::to_string(i) +
                       ": ByteLevel must be the last pre-tokenizer (its byte mapping would "
                       "change what the steps after it see)");
    CompiledStep compiled{step.kind, nullptr, false, true};
    if (step.kind == Step::Kind::kSplit) {
      compiled.pattern = compile(step.pattern, step.literal, i);
      compiled.keep_gaps = step.keep_gaps;
    } else {
      compiled.add_prefix_space = step.add_prefix_space;
      if (step.use_regex) compiled.pattern = compile(kByteLevelPattern, false, i);
    }
    impl_->steps.push_back(std::move(compiled));
  }
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text,
                         const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  std::vector<std::unique_ptr<icu::RegexMatcher>> matchers(impl_->steps.size());
  for (size_t i = 0; i < impl_->steps.size(); ++i) {
    if (!impl_->steps[i].pattern) continue;
    UErrorCode status = U_ZERO_ERROR;
    matchers[i].reset(impl_->steps[i].pattern->matcher(status));
    // ICU's backtracking stack is capped at 8 MB by default, which a run of
    // a few million spaces (\s*[\r\n]+ backtracks over it) exceeds; HF's
    // Oniguruma has no such cap, so neither do we: the stack grows on the heap.
    if (U_SUCCESS(status)) matchers[i]->setStackLimit(0, status);
    if (U_FAILURE(status)) throw InternalError(std::string("ICU regex: ") + u_errorName(status));
  }
  impl_->run(matchers, 0, text, emit);
}

}  // namespace headroom
