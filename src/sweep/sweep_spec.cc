#include "sweep/sweep_spec.h"

#include <toml++/toml.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "config/config.h"
#include "config/problems.h"
#include "config/schema.h"
#include "config/text.h"
#include "util/error.h"

namespace headroom {

namespace {

// Keys the sweep sets itself for every task (docs/config.md "Sweeps"):
// varying them would make two tasks share a run folder.
bool is_set_by_sweep(std::string_view name) {
  return name == "run.name" || name == "run.out_dir";
}

class TableParser {
 public:
  explicit TableParser(std::string_view source) : source_(source) {}

  void parse(const toml::table& sweep, SweepSpec& spec);
  void throw_problems();

 private:
  std::string where(const toml::source_region& region) const {
    return source_ + ":" + std::to_string(region.begin.line) + ":" +
           std::to_string(region.begin.column);
  }
  // `group`: the table the problem is in, "sweep", "sweep.zip" or "sweep.slurm".
  void report(const toml::source_region& region, std::string_view group, const std::string& what) {
    problems_.push_back({region.begin.line, region.begin.column,
                         where(region) + ": " + std::string(group) + ": " + what});
  }
  // Walks a table of varied keys: `prefix` is the dotted path so far, so
  // that `zero.stage = [2, 3]` (a nested table in TOML) and
  // `"zero.stage" = [2, 3]` read alike.
  void collect_keys(const toml::table& table, const std::string& prefix, std::string_view group,
                    std::vector<SweepKey>& out);
  void add_key(const std::string& name, const toml::key& key, const toml::node& node,
               std::string_view group, std::vector<SweepKey>& out);
  void parse_slurm(const toml::table& table, SlurmShape& shape);

  std::string source_;
  std::vector<ConfigProblem> problems_;
};

// The entries of a table in file order (toml++ keeps them sorted by key).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, node] : table)
    entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const toml::source_position& pa = a.first->source().begin;
    const toml::source_position& pb = b.first->source().begin;
    return std::tie(pa.line, pa.column) < std::tie(pb.line, pb.column);
  });
  return entries;
}

// nullopt when `node` is a valid value of `key`, else the key's complaint.
std::optional<std::string> check_value(const ConfigKey& key, const toml::node& node) {
  ExperimentConfig scratch;
  return key.set(scratch, node);
}

void TableParser::parse(const toml::table& sweep, SweepSpec& spec) {
  for (const auto& [key, node] : in_file_order(sweep)) {
    const std::string name(key->str());
    if (name == "zip" && node->is_table()) {
      collect_keys(*node->as_table(), "", "sweep.zip", spec.zip);
    } else if (name == "slurm" && node->is_table()) {
      parse_slurm(*node->as_table(), spec.slurm);
    } else if (node->is_table() && std::find(config_sections().begin(), config_sections().end(),
                                             name) != config_sections().end()) {
      collect_keys(*node->as_table(), name + ".", "sweep", spec.grid);
    } else {
      add_key(name, *key, *node, "sweep", spec.grid);
    }
  }
  // Zipped lists are varied together: they must be as long as each other.
  for (const SweepKey& key : spec.zip) {
    if (key.values.size() != spec.zip.front().values.size())
      problems_.push_back({0, 0,
                           key.where + ": sweep.zip: " + key.name + " has " +
                               std::to_string(key.values.size()) + " values, but " +
                               spec.zip.front().name + " (" + spec.zip.front().where + ") has " +
                               std::to_string(spec.zip.front().values.size()) +
                               ": zipped lists are varied together and must be equally long"});
  }
  for (const SweepKey& key : spec.zip) {
    for (const SweepKey& other : spec.grid)
      if (other.name == key.name)
        problems_.push_back({0, 0,
                             key.where + ": sweep.zip: " + key.name +
                                 " is also varied by the "
                                 "grid at " +
                                 other.where + ": vary a key in one place"});
  }
}

void TableParser::collect_keys(const toml::table& table, const std::string& prefix,
                               std::string_view group, std::vector<SweepKey>& out) {
  for (const auto& [key, node] : in_file_order(table)) {
    const std::string name = prefix + std::string(key->str());
    // `zero.stage = [...]` written as a dotted key nests a table [zero]:
    // read through it while the path is still a section name.
    if (node->is_table() && prefix.empty() &&
        std::find(config_sections().begin(), config_sections().end(), name) !=
            config_sections().end()) {
      collect_keys(*node->as_table(), name + ".", group, out);
      continue;
    }
    add_key(name, *key, *node, group, out);
  }
}

void TableParser::add_key(const std::string& name, const toml::key& key, const toml::node& node,
                          std::string_view group, std::vector<SweepKey>& out) {
  const ConfigKey* spec = find_config_key(name);
  if (!spec) {
    report(key.source(), group, name + ": unknown key" + suggest_config_key(name));
    return;
  }
  if (is_set_by_sweep(name)) {
    report(key.source(), group,
           name +
               ": set by the sweep for every task (run.name gets the task's "
               "number, run.out_dir the sweep's runs/ folder): it cannot vary");
    return;
  }
  const toml::array* list = node.as_array();
  if (!list || list->empty()) {
    report(node.source(), group,
           name + ": expected a non-empty list of the values to sweep, " + "e.g. [2, 3], got " +
               toml_describe(node));
    return;
  }
  for (const SweepKey& earlier : out)
    if (earlier.name == name) {
      report(key.source(), group, name + ": given twice (first at " + earlier.where + ")");
      return;
    }
  SweepKey swept{name, where(key.source()), {}};
  for (const toml::node& element : *list) {
    if (std::optional<std::string> complaint = check_value(*spec, element)) {
      report(element.source(), group, name + " = " + toml_render(element) + ": " + *complaint);
      continue;
    }
    swept.values.push_back({toml_render(element), where(element.source())});
  }
  out.push_back(std::move(swept));
}

void TableParser::parse_slurm(const toml::table& table, SlurmShape& shape) {
  struct IntKey {
    std::string_view name;
    int* value;
    int min;
  };
  const IntKey ints[] = {{"nodes", &shape.nodes, 1},
                         {"tasks_per_node", &shape.tasks_per_node, 1},
                         {"gpus_per_task", &shape.gpus_per_task, 0},
                         {"cpus_per_task", &shape.cpus_per_task, 1}};
  struct StringKey {
    std::string_view name;
    std::string* value;
  };
  const StringKey strings[] = {
      {"time", &shape.time}, {"partition", &shape.partition}, {"account", &shape.account}};
  std::vector<std::string_view> names;
  for (const IntKey& k : ints)
    names.push_back(k.name);
  for (const StringKey& k : strings)
    names.push_back(k.name);
  names.push_back("options");

  for (const auto& [key, node] : in_file_order(table)) {
    const std::string name(key->str());
    bool known = false;
    for (const IntKey& k : ints) {
      if (k.name != name) continue;
      known = true;
      const std::optional<int64_t> v = node->value_exact<int64_t>();
      if (!v || *v < k.min || *v > 65536)
        report(node->source(), "sweep.slurm",
               name + ": expected an integer in " + std::to_string(k.min) + "..65536, got " +
                   toml_describe(*node));
      else
        *k.value = static_cast<int>(*v);
    }
    for (const StringKey& k : strings) {
      if (k.name != name) continue;
      known = true;
      const std::optional<std::string> v = node->value_exact<std::string>();
      // These go into "#SBATCH --time=..." lines: one line, no spaces.
      if (!v || v->empty() || v->find_first_of(" \t\r\n") != std::string::npos)
        report(node->source(), "sweep.slurm",
               name + ": expected a non-empty string without spaces, got " + toml_describe(*node));
      else
        *k.value = *v;
    }
    if (name == "options") {
      known = true;
      const toml::array* list = node->as_array();
      bool ok = list != nullptr;
      if (list)
        for (const toml::node& element : *list) {
          const std::optional<std::string> v = element.value_exact<std::string>();
          if (!v || v->rfind("--", 0) != 0 || v->find_first_of("\r\n") != std::string::npos) {
            ok = false;
            break;
          }
          shape.options.push_back(*v);
        }
      if (!ok)
        report(node->source(), "sweep.slurm",
               "options: expected a list of sbatch options, one line each, such as "
               "[\"--qos=high\"], got " +
                   toml_describe(*node));
    }
    if (!known) {
      std::optional<std::string> near = nearest_word(name, names);
      report(key->source(), "sweep.slurm",
             name + ": unknown key" + (near ? " (did you mean " + toml_quote(*near) + "?)" : "") +
                 "; [sweep.slurm] takes nodes, tasks_per_node, gpus_per_task, "
                 "cpus_per_task, time, partition, account, options");
    }
  }
}

void TableParser::throw_problems() {
  throw_config_problems(std::move(problems_));
}

std::string trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

// "2,3" -> {"2", "3"}; `["q_proj","v_proj"],["o_proj"]` -> two lists: a
// comma inside brackets, braces or quotes does not split.
std::vector<std::string> split_values(std::string_view text) {
  std::vector<std::string> items;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == '\\' && quote == '"' && i + 1 < text.size())
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      items.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  items.push_back(trim(text.substr(start)));
  return items;
}

SweepKey parse_argument(const std::string& option, const std::string& text) {
  const std::string place =
      "--" + option + " " + (text.size() <= 120 ? text : text.substr(0, 120) + "...");
  const size_t equals = text.find('=');
  const std::string name = trim(std::string_view(text).substr(0, equals));
  if (equals == std::string::npos || name.empty())
    throw UsageError(place + ": expected section.key=value,value,..., e.g. zero.stage=2,3");
  const ConfigKey* spec = find_config_key(name);
  if (!spec) throw UsageError(place + ": " + name + ": unknown key" + suggest_config_key(name));
  if (is_set_by_sweep(name))
    throw UsageError(place + ": " + name +
                     ": set by the sweep for every task (run.name gets the task's number, "
                     "run.out_dir the sweep's runs/ folder): it cannot vary");
  SweepKey key{name, place, {}};
  std::string problems;
  for (const std::string& item : split_values(std::string_view(text).substr(equals + 1))) {
    if (item.empty()) {
      problems += (problems.empty() ? "" : "\n") + place + ": " + name + ": an empty value";
      continue;
    }
    std::unique_ptr<toml::table> holder = parse_override_value(item);
    const toml::node& node = *holder->get("value");
    if (std::optional<std::string> complaint = check_value(*spec, node)) {
      problems +=
          (problems.empty() ? "" : "\n") + place + ": " + name + " = " + item + ": " + *complaint;
      continue;
    }
    key.values.push_back({toml_render(node), place});
  }
  if (!problems.empty()) throw UsageError(problems);
  return key;
}

void replace_or_add(std::vector<SweepKey>& keys, SweepKey key) {
  for (SweepKey& earlier : keys)
    if (earlier.name == key.name) {
      earlier = std::move(key);
      return;
    }
  keys.push_back(std::move(key));
}

void remove_key(std::vector<SweepKey>& keys, const std::string& name) {
  std::erase_if(keys, [&](const SweepKey& k) { return k.name == name; });
}

}  // namespace

size_t SweepSpec::num_tasks() const {
  size_t n = 1;
  for (const SweepKey& key : grid) {
    n *= key.values.size();
    if (n > kMaxSweepTasks) return n;  // no overflow from a long product
  }
  if (!zip.empty()) n *= zip.front().values.size();
  return n;
}

SweepSpec parse_sweep_table(std::string_view toml_text, std::string_view source_name) {
  SweepSpec spec;
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error&) {
    // The config loader reports syntax errors with their position first.
    return spec;
  }
  const toml::node* sweep = root.get(kSweepSection);
  if (!sweep) return spec;
  TableParser parser(source_name);
  if (const toml::table* table = sweep->as_table())
    parser.parse(*table, spec);
  else
    throw UsageError(std::string(source_name) + ":" + std::to_string(sweep->source().begin.line) +
                     ":" + std::to_string(sweep->source().begin.column) +
                     ": sweep: expected a table [sweep], got " + toml_describe(*sweep));
  parser.throw_problems();
  return spec;
}

void add_sweep_arguments(SweepSpec& spec, const std::vector<std::string>& grid,
                         const std::vector<std::string>& zip) {
  std::vector<SweepKey> grid_keys, zip_keys;
  for (const std::string& text : grid) {
    SweepKey key = parse_argument("grid", text);
    for (const SweepKey& earlier : grid_keys)
      if (earlier.name == key.name)
        throw UsageError(key.where + ": " + key.name + ": given twice (also " + earlier.where +
                         ")");
    grid_keys.push_back(std::move(key));
  }
  for (const std::string& text : zip) {
    SweepKey key = parse_argument("zip", text);
    for (const SweepKey& earlier : grid_keys)
      if (earlier.name == key.name)
        throw UsageError(key.where + ": " + key.name + ": also varied by " + earlier.where +
                         ": vary a key in one place");
    for (const SweepKey& earlier : zip_keys)
      if (earlier.name == key.name)
        throw UsageError(key.where + ": " + key.name + ": given twice (also " + earlier.where +
                         ")");
    zip_keys.push_back(std::move(key));
  }
  // The command line's zip group replaces the file's whole group: zipped
  // lists only make sense together.
  if (!zip_keys.empty()) {
    spec.zip.clear();
    for (const SweepKey& key : zip_keys)
      remove_key(spec.grid, key.name);
    spec.zip = std::move(zip_keys);
    for (const SweepKey& key : spec.zip)
      if (key.values.size() != spec.zip.front().values.size())
        throw UsageError(key.where + ": " + key.name + " has " + std::to_string(key.values.size()) +
                         " values, but " + spec.zip.front().name + " (" + spec.zip.front().where +
                         ") has " + std::to_string(spec.zip.front().values.size()) +
                         ": zipped lists are varied together and must be equally long");
  }
  for (SweepKey& key : grid_keys) {
    remove_key(spec.zip, key.name);
    replace_or_add(spec.grid, std::move(key));
  }
  if (spec.num_tasks() > kMaxSweepTasks)
    throw UsageError("the sweep has more than " + std::to_string(kMaxSweepTasks) +
                     " tasks (the product of its lists): Slurm's default MaxArraySize "
                     "allows indices 0..1000; split it");
}

std::vector<std::string> SweepTask::overrides() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size(); ++i)
    out.push_back(keys[i] + "=" + values[i].text);
  return out;
}

std::string SweepTask::describe() const {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i)
    out += (out.empty() ? "" : " ") + keys[i] + "=" + values[i].text;
  return out.empty() ? "the base experiment" : out;
}

std::vector<SweepTask> expand_sweep(const SweepSpec& spec) {
  const size_t n = spec.num_tasks();
  if (n > kMaxSweepTasks)
    throw UsageError("the sweep has more than " + std::to_string(kMaxSweepTasks) +
                     " tasks (the product of its lists): Slurm's default MaxArraySize "
                     "allows indices 0..1000; split it");
  std::vector<SweepTask> tasks(n);
  for (size_t t = 0; t < n; ++t) {
    SweepTask& task = tasks[t];
    task.index = static_cast<int>(t);
    // Mixed radix, the last axis fastest: the zip group, then the grid
    // keys from the last to the first.
    size_t rest = t;
    std::vector<std::pair<std::string, SweepValue>> reversed;
    if (!spec.zip.empty()) {
      const size_t len = spec.zip.front().values.size();
      const size_t i = rest % len;
      rest /= len;
      for (auto it = spec.zip.rbegin(); it != spec.zip.rend(); ++it)
        reversed.emplace_back(it->name, it->values[i]);
    }
    for (auto it = spec.grid.rbegin(); it != spec.grid.rend(); ++it) {
      const size_t len = it->values.size();
      reversed.emplace_back(it->name, it->values[rest % len]);
      rest /= len;
    }
    for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) {
      task.keys.push_back(it->first);
      task.values.push_back(it->second);
    }
  }
  return tasks;
}

}  // namespace headroom
