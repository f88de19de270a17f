// One JSON document read whole, its syntax and number errors worded as
// json_error.h words them: the reading every JSON file reader of headroom
// starts with. Header-only, so util itself links no JSON library; its
// includers already use nlohmann::json.
#pragma once

#include <istream>
#include <nlohmann/json.hpp>
#include <string>

#include "util/json_error.h"

namespace headroom {

// The document in `in` (the file `path`); UsageError "<path>: JSON syntax
// error at byte ..." or "<path>: JSON number out of range: ..." otherwise.
inline nlohmann::json parse_json_document(std::istream& in, const std::string& path) {
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw_json_syntax_error(path, e.what(), e.byte);
  } catch (const nlohmann::json::out_of_range& e) {
    throw_json_number_error(path, e.what());
  }
}

}  // namespace headroom
