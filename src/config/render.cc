// The two views of the schema meant for people: the resolved config as TOML
// (echoed into every run folder and trace) and the key reference in Markdown.
#include "config/config.h"
#include "config/schema.h"

namespace headroom {

std::string to_toml(const ExperimentConfig& config) {
  std::string text;
  std::string_view section;
  for (const ConfigKey& key : config_schema()) {
    if (key.section() != section) {
      if (!text.empty()) text += '\n';
      section = key.section();
      // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on
      // `"[" + std::string(...)`.
      text += '[';
      text += section;
      text += "]\n";
    }
    text += std::string(key.leaf()) + " = " + key.get(config) + "\n";
  }
  return text;
}

namespace {

// A table cell: a '|' would end the cell early and "<k>" would be read as an
// HTML tag, so both are backslash-escaped. Inside a code span only the '|'
// escape is honoured (GFM tables), so `code` cells escape just that.
std::string cell(std::string_view text, bool code = false) {
  std::string out;
  for (char ch : text) {
    if (ch == '|' || (ch == '<' && !code)) out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

std::string config_reference_markdown() {
  std::string text;
  std::string_view section;
  for (const ConfigKey& key : config_schema()) {
    if (key.section() != section) {
      section = key.section();
      text += (text.empty() ? "" : "\n");
      text += "### [";
      text += section;
      text += "]\n\n";
      text += "| key | type | default | meaning |\n";
      text += "|---|---|---|---|\n";
    }
    text += "| `" + key.name + "` | " + cell(key.type) + " | `" +
            cell(key.default_text, /*code=*/true) + "` | " + cell(key.doc) + " |\n";
  }
  text += "\n### Rules between keys\n\n";
  text += "Checked after the file and every `--set`; the error names both keys.\n\n";
  for (const ConfigRule& rule : config_rules())
    text += "- " + rule.doc + "\n";
  return text;
}

}  // namespace headroom
