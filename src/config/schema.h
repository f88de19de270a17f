// The schema of the experiment config: every key once, and every rule between
// keys once. Loading, --set, to_toml() and the generated reference in
// docs/config.md all walk these tables, which is what keeps them in step.
#pragma once

#include <toml++/toml.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace headroom {

struct ConfigKey {
  std::string name;          // "attention.block_size": section, dot, key
  std::string type;          // what the value must be: "integer >= 1", `"fp32" or "bf16"`
  std::string doc;           // one or two sentences for the reference
  std::string default_text;  // the default as TOML text: get(ExperimentConfig{})
  // Checks one TOML value and, only if it is acceptable, stores it into the
  // config. Returns nullopt when stored, else the complaint that follows
  // "<key>: " in the error, e.g. `expected an integer in 0..3, got 5`.
  std::function<std::optional<std::string>(ExperimentConfig&, const toml::node&)> set;
  // The key's value in `config` as TOML text: `64`, `"causal"`, `[0.9, 0.95]`.
  std::function<std::string(const ExperimentConfig&)> get;

  std::string_view section() const;  // "attention"
  std::string_view leaf() const;     // "block_size"
};

// All keys, grouped by section in the order of DESIGN.md's sketch.
const std::vector<ConfigKey>& config_schema();

// The key called `name` ("zero.stage"), or nullptr when there is none.
const ConfigKey* find_config_key(std::string_view name);

// The section names in schema order: "run", "model", ..., "trace".
const std::vector<std::string>& config_sections();

// A rule that a value of `key` must satisfy given the value of `other`, checked
// after the file and all overrides are applied (so the order in which they were
// set does not matter).
struct ConfigRule {
  std::string key;    // the key the error is reported on
  std::string other;  // the key it is checked against
  std::string doc;    // the rule as the reference states it
  // nullopt when the config obeys the rule, else the complaint that follows
  // "<key>: ", naming `other` and its value.
  std::function<std::optional<std::string>(const ExperimentConfig&)> check;
  // The --set values that satisfy the rule for a change of `other` that
  // breaks it, set beside the change (config/knobs.h: offload's
  // zero.stage=1); empty when no such value lowers memory, and a change
  // that breaks the rule does not apply.
  std::vector<std::string> companions = {};
};

const std::vector<ConfigRule>& config_rules();

// The rules `config` breaks, in config_rules() order.
std::vector<const ConfigRule*> broken_rules(const ExperimentConfig& config);

// The table that lists a sweep's varied keys (sweep/sweep_spec.h); the loader
// knows its name so that it is neither an unknown section nor a typo target.
inline constexpr std::string_view kSweepSection = "sweep";

// " (did you mean "x"?)" for a plausible typo of a key, or "". A key written
// in the wrong section ("run.lr") is matched by its leaf before spelling.
std::string suggest_config_key(std::string_view name);

// The value of "--set key=value" as a TOML value under the key "value"; text
// that is not one (a bare word, a path) is taken as a string, so
// `--set run.backend=meta` works without shell-quoted TOML quotes.
std::unique_ptr<toml::table> parse_override_value(const std::string& value_text);

}  // namespace headroom
