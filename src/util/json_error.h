// The wording of a JSON syntax error, for every JSON file headroom reads
// (config.json, safetensors headers and indexes, adapter_config.json,
// trainer_state.json, JSONL lines).
//
// nlohmann::json says where and what in one string,
//   [json.exception.parse_error.101] parse error at line 1, column 18: syntax
//   error while parsing object key - unexpected ','; expected string literal
// and its byte offset apart (parse_error::byte). These functions take both
// (what() and byte, so util needs no JSON library) and word them as
//   config.json: JSON syntax error at byte 18 (line 1, column 18): syntax
//   error while parsing object key - unexpected ','; expected string literal
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace headroom {

// nlohmann's what() taken apart.
struct JsonErrorText {
  std::string position;  // "line 1, column 18"; empty when what() gives none
  std::string detail;    // what was expected ("syntax error while parsing ...")
};

// Strips the "[json.exception.<kind>.<id>] " tag and the "parse error at
// <position>: " lead from nlohmann's what(); a message in neither shape is
// returned whole as the detail.
JsonErrorText split_json_error(std::string_view what);

// "<path>: JSON syntax error at byte <byte><of> (<position>): <detail>",
// without the parenthesis when what() has no position. `of` names what the
// offset counts from when that is not the start of `path` (" of the header").
std::string json_syntax_error_message(const std::string& path, std::string_view what, uint64_t byte,
                                      std::string_view of = {});

// A number past a double's range (1e400) is no parse_error to nlohmann but an
// out_of_range (406) without a byte offset: UsageError
// "<path>: JSON number out of range<of>: number overflow parsing '1e400'".
[[noreturn]] void throw_json_number_error(const std::string& path, std::string_view what,
                                          std::string_view of = {});

// Throws UsageError(json_syntax_error_message(...)).
[[noreturn]] void throw_json_syntax_error(const std::string& path, std::string_view what,
                                          uint64_t byte, std::string_view of = {});

}  // namespace headroom
