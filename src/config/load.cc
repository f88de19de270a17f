// Loading: TOML file -> schema setters -> --set overrides -> rules between keys.
//
// Each stage reports every problem it finds (sorted by position), not just the
// first, so one edit fixes a file; later stages only run on a clean config,
// because a rule checked against a value that failed to load would only echo
// the first error.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "config/config.h"
#include "config/problems.h"
#include "config/schema.h"
#include "config/text.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/read_file.h"

namespace headroom {

namespace {

// Where a key got its value, so that a contradiction can point at the line (or
// --set argument) that set it; `order` says which of two keys was set last.
struct Origin {
  std::string where;   // "x.toml:4:21" or "--set zero.stage=0"
  uint64_t order = 0;  // file position, then overrides after every position
};

class Loader {
 public:
  // `sweep_table`: what a [sweep] table in the file means (config.h).
  Loader(std::string_view source_name, SweepTable sweep_table)
      : source_(source_name), sweep_table_(sweep_table) {}

  void apply_file(std::string_view toml_text);
  void apply_overrides(const std::vector<std::string>& overrides);
  void resolve_defaults();
  void check_rules();

  ExperimentConfig& config() { return config_; }

 private:
  std::string where(const toml::source_region& region) const {
    return source_ + ":" + std::to_string(region.begin.line) + ":" +
           std::to_string(region.begin.column);
  }
  void report(const toml::source_region& region, const std::string& what) {
    problems_.push_back({region.begin.line, region.begin.column, where(region) + ": " + what});
  }
  // toml++ walks a table in key order, not file order, so a file value's
  // order is its position; every override comes after every file value.
  void set_file_origin(const std::string& key, const toml::source_region& region) {
    origins_[key] =
        Origin{where(region), (uint64_t{region.begin.line} << 32) | region.begin.column};
  }
  void set_override_origin(const std::string& key, std::string place) {
    origins_[key] = Origin{std::move(place), kOverrideOrder + ++override_count_};
  }
  void apply_section(const std::string& section, const toml::table& table);
  // Throws one UsageError listing every problem so far, if there is any.
  void throw_problems(bool sort_by_position);

  std::string source_;
  SweepTable sweep_table_;
  ExperimentConfig config_;
  static constexpr uint64_t kOverrideOrder = uint64_t{1} << 63;
  std::map<std::string, Origin> origins_;
  uint64_t override_count_ = 0;
  std::vector<ConfigProblem> problems_;
};

}  // namespace

std::string suggest_config_key(std::string_view name) {
  const size_t dot = name.find('.');
  const std::string_view leaf = dot == std::string_view::npos ? name : name.substr(dot + 1);
  std::vector<std::string_view> same_leaf;
  std::vector<std::string_view> names;
  for (const ConfigKey& key : config_schema()) {
    names.push_back(key.name);
    if (key.leaf() == leaf) same_leaf.push_back(key.name);
  }
  std::optional<std::string> near;
  if (same_leaf.size() == 1) {
    near = std::string(same_leaf.front());
  } else {
    near = nearest_word(name, names);
  }
  return near ? " (did you mean " + toml_quote(*near) + "?)" : "";
}

namespace {

std::string suggest_key(std::string_view name) {
  return suggest_config_key(name);
}

std::string suggest_section(std::string_view name) {
  std::vector<std::string_view> sections(config_sections().begin(), config_sections().end());
  sections.push_back(kSweepSection);
  std::optional<std::string> near = nearest_word(name, sections);
  return near ? " (did you mean " + toml_quote(*near) + "?)" : "";
}

bool is_section(std::string_view name) {
  const auto& sections = config_sections();
  return std::find(sections.begin(), sections.end(), name) != sections.end();
}

void Loader::apply_file(std::string_view toml_text) {
  toml::table root;
  try {
    root = toml::parse(toml_text, std::string_view(source_));
  } catch (const toml::parse_error& error) {
    throw UsageError(where(error.source()) +
                     ": TOML syntax error: " + std::string(error.description()));
  }
  for (auto&& [key, node] : root) {
    const std::string section(key.str());
    if (section == kSweepSection) {
      // The sweep layer reads it (sweep/sweep_spec.h); train and plan refuse
      // it, since a file that varies keys is not one run.
      if (sweep_table_ == SweepTable::kRefuse)
        report(node.source(),
               "[sweep]: this file describes a sweep, not one run: run `headroom sweep " + source_ +
                   "`, or train one of the task configs it writes (<out>/tasks/NNN.toml)");
      continue;
    }
    if (!is_section(section)) {
      if (node.is_table())
        report(node.source(), section + ": unknown section" + suggest_section(section));
      else
        report(key.source(), section + ": unknown key" + suggest_key(section));
      continue;
    }
    const toml::table* table = node.as_table();
    if (!table) {
      report(node.source(),
             section + ": expected a table [" + section + "], got " + toml_describe(node));
      continue;
    }
    apply_section(section, *table);
  }
  throw_problems(/*sort_by_position=*/true);
}

void Loader::apply_section(const std::string& section, const toml::table& table) {
  for (auto&& [key, value] : table) {
    const std::string name = section + "." + std::string(key.str());
    const ConfigKey* spec = find_config_key(name);
    if (!spec) {
      report(key.source(), name + ": unknown key" + suggest_key(name));
      continue;
    }
    if (std::optional<std::string> complaint = spec->set(config_, value)) {
      report(value.source(), name + ": " + *complaint);
      continue;
    }
    set_file_origin(name, value.source());
  }
}

std::string trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace

std::unique_ptr<toml::table> parse_override_value(const std::string& value_text) {
  auto holder = std::make_unique<toml::table>();
  try {
    toml::table parsed = toml::parse("value = " + value_text, std::string_view("--set"));
    // "5\nother = 6" parses, but as two keys: not one value, so a string.
    if (parsed.size() == 1 && parsed.contains("value")) {
      *holder = std::move(parsed);
      return holder;
    }
  } catch (const toml::parse_error&) {
  }
  holder->insert("value", value_text);
  return holder;
}

namespace {

void Loader::apply_overrides(const std::vector<std::string>& overrides) {
  for (const std::string& text : overrides) {
    // The override as the user typed it, cut short: the complaint quotes the
    // value again, and a 5000-character value need not be printed twice.
    const std::string place = "--set " + (text.size() <= 120 ? text : text.substr(0, 120) + "...");
    const size_t equals = text.find('=');
    const std::string name = trim(std::string_view(text).substr(0, equals));
    if (equals == std::string::npos || name.empty()) {
      problems_.push_back({0, 0, place + ": expected section.key=value, e.g. run.steps=10"});
      continue;
    }
    const ConfigKey* spec = find_config_key(name);
    if (!spec) {
      problems_.push_back({0, 0, place + ": " + name + ": unknown key" + suggest_key(name)});
      continue;
    }
    std::unique_ptr<toml::table> holder = parse_override_value(trim(text.substr(equals + 1)));
    if (std::optional<std::string> complaint = spec->set(config_, *holder->get("value"))) {
      problems_.push_back({0, 0, place + ": " + name + ": " + *complaint});
      continue;
    }
    set_override_origin(name, place);
  }
  // Overrides are reported in the order given, which is the order they apply.
  throw_problems(/*sort_by_position=*/false);
}

void Loader::resolve_defaults() {
  // The preset default ("tiny") stands in only when nothing else names the
  // architecture: a file that gives model.hf_config means that config.json.
  if (!origins_.contains("model.preset") && !config_.model.hf_config.empty())
    config_.model.preset.clear();
}

void Loader::check_rules() {
  for (const ConfigRule& rule : config_rules()) {
    std::optional<std::string> complaint = rule.check(config_);
    if (!complaint) continue;
    // Point at whichever of the two keys was set last: that is the edit that
    // made them contradict. With both at their defaults, name the source.
    const Origin* origin = nullptr;
    for (const std::string* key : {&rule.key, &rule.other}) {
      auto it = origins_.find(*key);
      if (it != origins_.end() && (!origin || it->second.order > origin->order))
        origin = &it->second;
    }
    problems_.push_back(
        {0, 0, (origin ? origin->where : source_) + ": " + rule.key + ": " + *complaint});
  }
  throw_problems(/*sort_by_position=*/false);
}

void Loader::throw_problems(bool sort_by_position) {
  throw_config_problems(std::move(problems_), sort_by_position);
}

}  // namespace

ExperimentConfig load_config_string(std::string_view toml_text, std::string_view source_name,
                                    const std::vector<std::string>& overrides,
                                    SweepTable sweep_table) {
  Loader loader(source_name, sweep_table);
  loader.apply_file(toml_text);
  loader.apply_overrides(overrides);
  loader.resolve_defaults();
  loader.check_rules();
  return loader.config();
}

ExperimentConfig with_overrides_unchecked(const ExperimentConfig& config,
                                          const std::vector<std::string>& overrides) {
  // Set on a copy, with no TOML round trip: the catalogue asks this of
  // every knob, and `config` is already resolved.
  Loader loader("<config>", SweepTable::kRefuse);
  loader.config() = config;
  loader.apply_overrides(overrides);
  return loader.config();
}

namespace {

// A config is a page of TOML; anything near this size is not one (a
// dataset or /dev/zero named by mistake) and would only exhaust memory.
constexpr uint64_t kMaxConfigBytes = 16 * kMiB;

}  // namespace

ExperimentConfig load_config_file(const std::string& path,
                                  const std::vector<std::string>& overrides,
                                  SweepTable sweep_table) {
  return load_config_string(read_config_text(path), path, overrides, sweep_table);
}

std::string read_config_text(const std::string& path) {
  return read_regular_file(path, kMaxConfigBytes, "config file");
}

}  // namespace headroom
