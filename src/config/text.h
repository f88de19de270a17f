// Small text helpers shared by the schema, the loader and the renderers: TOML
// literals for values we print, and how a value the user gave is described in
// an error.
#pragma once

#include <toml++/toml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// A TOML basic string literal: quotes, with `"`, `\` and control characters
// escaped, so any std::string survives a round trip.
std::string toml_quote(std::string_view text);

// The shortest text that reads back to exactly `value`, always spelled as a
// TOML float ("1.0", not "1"), "inf"/"nan" included.
std::string toml_float(double value);

// A TOML value as the user would have written it: `"ten"`, `5`, `[1, 2]`.
std::string toml_render(const toml::node& node);

// The value with its type, for "got ..." when the type is wrong:
// `string "ten"`, `float 1.5`, `array [1, 2]`, `table { a = 1 }`.
std::string toml_describe(const toml::node& node);

// `"a", "b" or "c"`: a closed set of string choices as errors and docs list it.
std::string quoted_choices(const std::vector<std::string_view>& choices);

// The candidate closest to `word` by edit distance (a swap of two neighbours
// counts as one edit), if it is close enough to be a plausible typo: at most
// max(1, min(3, |word| / 4)) edits. Ties go to the earliest candidate.
std::optional<std::string> nearest_word(std::string_view word,
                                        const std::vector<std::string_view>& candidates);

}  // namespace headroom
