// util/json_error.h on nlohmann::json's own parse errors: the wording every
// JSON reader shares, checked against what the library really throws.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "util/error.h"
#include "util/json_error.h"

namespace headroom {
namespace {

// nlohmann's parse_error for `text`.
nlohmann::json::parse_error parse_error_of(const std::string& text) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    ADD_FAILURE() << "parsed: " << parsed.dump();
  } catch (const nlohmann::json::parse_error& e) {
    return e;
  }
  return nlohmann::json::parse_error::create(101, 0, "none", nullptr);
}

TEST(JsonError, SplitsNlohmannsMessage) {
  const auto e = parse_error_of("{\"vocab_size\": 1,, }");
  const JsonErrorText text = split_json_error(e.what());
  EXPECT_EQ(text.position, "line 1, column 18");
  EXPECT_EQ(text.detail,
            "syntax error while parsing object key - unexpected ','; expected string literal");
  // A message in neither shape is all detail; a tag alone is dropped.
  EXPECT_EQ(split_json_error("something else").detail, "something else");
  EXPECT_EQ(split_json_error("something else").position, "");
  EXPECT_EQ(
      split_json_error("[json.exception.out_of_range.406] number overflow parsing '1e999'").detail,
      "number overflow parsing '1e999'");
}

TEST(JsonError, NamesThePathTheByteAndTheLine) {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": [1, 2,]\n}\n";
  const auto e = parse_error_of(text);
  // The byte (1-based) is the offending ']', the 14th character of line 3.
  ASSERT_EQ(text.substr(e.byte - 1, 1), "]");
  ASSERT_EQ(text.rfind('\n', e.byte - 1), e.byte - 15);
  EXPECT_EQ(json_syntax_error_message("config.json", e.what(), e.byte),
            "config.json: JSON syntax error at byte 26 (line 3, column 14): syntax error while "
            "parsing value - unexpected ']'; expected '[', '{', or a literal");
  const auto cut = parse_error_of("{\"a\": [1, 2");
  EXPECT_EQ(
      json_syntax_error_message("x.safetensors: header", cut.what(), cut.byte, " of the header"),
      "x.safetensors: header: JSON syntax error at byte 12 of the header (line 1, column "
      "12): syntax error while parsing array - unexpected end of input; expected ']'");
}

TEST(JsonError, AStreamGivesTheSameMessage) {
  std::istringstream in("[1, 2,, 3]");
  try {
    const nlohmann::json parsed = nlohmann::json::parse(in);
    FAIL() << "parsed: " << parsed.dump();
  } catch (const nlohmann::json::parse_error& e) {
    EXPECT_EQ(json_syntax_error_message("trainer_state.json", e.what(), e.byte),
              "trainer_state.json: JSON syntax error at byte 7 (line 1, column 7): syntax error "
              "while parsing value - unexpected ','; expected '[', '{', or a literal");
  }
}

TEST(JsonError, ThrowsAUsageError) {
  const auto e = parse_error_of("");
  try {
    throw_json_syntax_error("empty.json", e.what(), e.byte);
    FAIL() << "no throw";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()),
              "empty.json: JSON syntax error at byte 1 (line 1, column 1): syntax error while "
              "parsing value - unexpected end of input; expected '[', '{', or a literal");
  }
}

}  // namespace
}  // namespace headroom
