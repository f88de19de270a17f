#include "tokenizer/pre_tokenizer.h"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include <algorithm>
#include <climits>

#include "util/error.h"

namespace headroom {

namespace {

struct CompiledStep {
  PreTokenizer::Step::Kind kind;
  std::unique_ptr<icu::RegexPattern> pattern;  // null: no regex split in this step
  bool add_prefix_space = false;
  bool keep_gaps = true;
  std::string name;  // for errors: pre_tokenizer.pretokenizers[0] (Split regex "...")
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

std::string step_name(const PreTokenizer::Step& step, size_t index) {
  std::string name = step.key.empty() ? "pre_tokenizer step " + std::to_string(index) : step.key;
  if (step.kind == PreTokenizer::Step::Kind::kByteLevel) return name + " (ByteLevel's regex)";
  constexpr size_t kShown = 80;  // a pattern is one line of the message, not a page
  std::string pattern = step.pattern.substr(0, kShown);
  if (step.pattern.size() > kShown) pattern += "...";
  return name + " (Split " + (step.literal ? "string" : "regex") + " \"" + pattern + "\")";
}

// The limits of the header, for a piece of `bytes` bytes.
int32_t time_limit(size_t bytes) {
  const int64_t ticks = PreTokenizer::kRegexTicksFloor +
                        static_cast<int64_t>(bytes / 1024) * PreTokenizer::kRegexTicksPerKiB;
  return static_cast<int32_t>(std::min<int64_t>(ticks, INT32_MAX));
}

int32_t stack_limit(size_t bytes) {
  constexpr int64_t kDefault = int64_t{8} << 20;  // ICU's own
  const int64_t wanted =
      std::min<int64_t>(static_cast<int64_t>(std::min<size_t>(bytes, INT32_MAX)) *
                            PreTokenizer::kRegexStackBytesPerByte,
                        INT32_MAX);
  return static_cast<int32_t>(std::max(kDefault, wanted));
}

// Where find() is trying a match: ICU reports each start position it moves
// to, so a time-out can name the byte it was stuck at, not just where the
// search began.
struct FindProgress {
  int64_t at = 0;
};

UBool U_CALLCONV note_progress(const void* context, int64_t index) {
  const_cast<FindProgress*>(static_cast<const FindProgress*>(context))->at = index;
  return true;
}

// Calls `emit` with the matches of `matcher` in `text` and, with
// `keep_gaps`, the gaps between them (HF's SplitDelimiterBehavior::Isolated),
// skipping empty pieces. `offset` is where `text` begins in split()'s text.
template <typename Emit>
void split_matches(icu::RegexMatcher& matcher, const CompiledStep& step, std::string_view text,
                   size_t offset, Emit&& emit) {
  UErrorCode status = U_ZERO_ERROR;
  // Both limits count from the reset below, over every find() of this piece.
  matcher.setTimeLimit(time_limit(text.size()), status);
  matcher.setStackLimit(stack_limit(text.size()), status);
  FindProgress progress;
  matcher.setFindProgressCallback(note_progress, &progress, status);
  if (U_FAILURE(status)) throw InternalError(std::string("ICU regex: ") + u_errorName(status));
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
    if (step.keep_gaps && start > previous)
      emit(text.substr(static_cast<size_t>(previous), static_cast<size_t>(start - previous)));
    if (end > start)
      emit(text.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)));
    previous = end;
    progress.at = end;
  }
  if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW) {
    const size_t at = offset + static_cast<size_t>(std::max(previous, progress.at));
    const std::string limit =
        status == U_REGEX_TIME_OUT
            ? "its time limit of " + std::to_string(matcher.getTimeLimit()) +
                  " ticks (10,000 backtracking states each) for a piece of " +
                  std::to_string(text.size()) + " bytes"
            : "its backtracking stack limit of " + std::to_string(matcher.getStackLimit()) +
                  " bytes for a piece of " + std::to_string(text.size()) + " bytes";
    throw RegexLimitError(step.name,
                          "the regex exceeded " + limit + " (" + u_errorName(status) +
                              "): the pattern backtracks catastrophically on this text",
                          at);
  }
  if (U_FAILURE(status)) throw InternalError(std::string("ICU regex: ") + u_errorName(status));
  if (step.keep_gaps && static_cast<size_t>(previous) < text.size())
    emit(text.substr(static_cast<size_t>(previous)));
}

}  // namespace

struct PreTokenizer::Impl {
  std::vector<CompiledStep> steps;

  // `offset`: where `piece` begins in split()'s text.
  void run(std::vector<std::unique_ptr<icu::RegexMatcher>>& matchers, size_t step,
           std::string_view piece, size_t offset,
           const std::function<void(std::string_view)>& emit) const {
    if (step == steps.size()) {
      emit(piece);
      return;
    }
    const CompiledStep& s = steps[step];
    std::string prefixed;
    size_t prefix = 0;  // the added space is at no position of the text
    if (s.add_prefix_space && piece[0] != ' ') {
      prefixed.reserve(piece.size() + 1);
      prefixed += ' ';
      prefixed += piece;
      piece = prefixed;
      prefix = 1;
    }
    if (!s.pattern) {
      run(matchers, step + 1, piece, offset, emit);
      return;
    }
    split_matches(*matchers[step], s, piece, offset, [&](std::string_view part) {
      const size_t in_piece = static_cast<size_t>(part.data() - piece.data());
      run(matchers, step + 1, part, offset + (in_piece > prefix ? in_piece - prefix : 0), emit);
    });
  }
};

PreTokenizer::PreTokenizer(const std::vector<Step>& steps) : impl_(std::make_unique<Impl>()) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.kind == Step::Kind::kByteLevel && i + 1 != steps.size())
      throw UsageError("step " + std::to_string(i) +
                       ": ByteLevel must be the last pre-tokenizer (its byte mapping would "
                       "change what the steps after it see)");
    CompiledStep compiled{step.kind, nullptr, false, true, step_name(step, i)};
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
    if (U_FAILURE(status)) throw InternalError(std::string("ICU regex: ") + u_errorName(status));
  }
  impl_->run(matchers, 0, text, 0, emit);
}

}  // namespace headroom
