#include "util/json_error.h"

#include "util/error.h"

namespace headroom {

JsonErrorText split_json_error(std::string_view what) {
  constexpr std::string_view kTag = "[json.exception.";
  if (what.substr(0, kTag.size()) == kTag) {
    const size_t close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  JsonErrorText text;
  constexpr std::string_view kLead = "parse error at ";
  if (what.substr(0, kLead.size()) == kLead) {
    const size_t colon = what.find(": ");
    if (colon != std::string_view::npos) {
      text.position = std::string(what.substr(kLead.size(), colon - kLead.size()));
      what.remove_prefix(colon + 2);
    }
  }
  text.detail = std::string(what);
  return text;
}

std::string json_syntax_error_message(const std::string& path, std::string_view what, uint64_t byte,
                                      std::string_view of) {
  const JsonErrorText text = split_json_error(what);
  std::string message = path + ": JSON syntax error at byte " + std::to_string(byte);
  message += of;
  if (!text.position.empty()) message += " (" + text.position + ")";
  return message + ": " + text.detail;
}

void throw_json_syntax_error(const std::string& path, std::string_view what, uint64_t byte,
                             std::string_view of) {
  throw UsageError(json_syntax_error_message(path, what, byte, of));
}

void throw_json_number_error(const std::string& path, std::string_view what, std::string_view of) {
  throw UsageError(path + ": JSON number out of range" + std::string(of) + ": " +
                   split_json_error(what).detail);
}

}  // namespace headroom
