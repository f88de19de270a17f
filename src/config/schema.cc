#include "config/schema.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "config/text.h"
#include "memory/device_preset.h"
#include "util/bytes.h"

namespace headroom {

std::string_view ConfigKey::section() const {
  return std::string_view(name).substr(0, name.find('.'));
}

std::string_view ConfigKey::leaf() const {
  return std::string_view(name).substr(name.find('.') + 1);
}

namespace {

using Complaint = std::optional<std::string>;

// A field accessor is a generic lambda `[](auto& c) -> auto& { return c.run.steps; }`:
// one expression that serves both the setter (mutable) and the getter (const).
template <class Access>
using FieldType =
    std::remove_cvref_t<decltype(std::declval<Access>()(std::declval<ExperimentConfig&>()))>;

// HR_FIELD(run.steps) names the key and reaches its field with the same tokens,
// so a key's name and the struct member it writes cannot drift apart.
#define HR_FIELD(path)          \
#path, [](auto& c) -> auto& { \
    return c.path;              \
  }

ConfigKey make_key(std::string name, std::string type, std::string doc,
                   decltype(ConfigKey::set) set, decltype(ConfigKey::get) get) {
  ConfigKey key;
  key.name = std::move(name);
  key.type = std::move(type);
  key.doc = std::move(doc);
  key.set = std::move(set);
  key.get = std::move(get);
  key.default_text = key.get(ExperimentConfig{});
  return key;
}

// --- integers ---------------------------------------------------------------

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
// Token counts of one micro-batch: cu_seqlens and positions are int32, as in
// FlashAttention's varlen interface.
constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();

template <class Access>
ConfigKey integer(std::string name, Access field, int64_t min, int64_t max, std::string doc) {
  using T = FieldType<Access>;
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  // The field's own type caps the range, so the narrowing store below is exact.
  max = std::min<int64_t>(max, std::numeric_limits<T>::max());
  const std::string bounded = " in " + std::to_string(min) + ".." + std::to_string(max);
  const std::string range = max == static_cast<int64_t>(std::numeric_limits<T>::max())
                                ? " >= " + std::to_string(min)
                                : bounded;
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* value = node.as_integer();
    if (!value) return "expected an integer, got " + toml_describe(node);
    const int64_t v = value->get();
    if (v < min) return "expected an integer" + range + ", got " + std::to_string(v);
    // Past the field's own limit the ">= min" of the docs would not explain it.
    if (v > max) return "expected an integer" + bounded + ", got " + std::to_string(v);
    field(c) = static_cast<T>(v);
    return std::nullopt;
  };
  auto get = [=](const ExperimentConfig& c) { return std::to_string(field(c)); };
  return make_key(std::move(name), "integer" + range, std::move(doc), set, get);
}

// --- floats -----------------------------------------------------------------

// An interval over the reals; bounds are optional and open or closed.
struct Interval {
  std::optional<double> low;
  bool low_closed = true;
  std::optional<double> high;
  bool high_closed = false;

  bool contains(double v) const {
    if (!std::isfinite(v)) return false;
    if (low && (low_closed ? v < *low : v <= *low)) return false;
    if (high && (high_closed ? v > *high : v >= *high)) return false;
    return true;
  }
  // " > 0", " >= 0", " in [0, 1)"
  std::string text() const {
    auto number = [](double v) {
      std::string t = toml_float(v);
      // "0" reads better than "0.0" in a range; the value is exact either way.
      if (t.size() > 2 && t.ends_with(".0")) t.resize(t.size() - 2);
      return t;
    };
    if (low && high)
      return std::string(" in ") + (low_closed ? "[" : "(") + number(*low) + ", " + number(*high) +
             (high_closed ? "]" : ")");
    if (low) return std::string(low_closed ? " >= " : " > ") + number(*low);
    if (high) return std::string(high_closed ? " <= " : " < ") + number(*high);
    return "";
  }
};

const Interval kPositive{.low = 0.0, .low_closed = false, .high = {}, .high_closed = false};
const Interval kNonNegative{.low = 0.0, .low_closed = true, .high = {}, .high_closed = false};
const Interval kUnitHalfOpen{.low = 0.0, .low_closed = true, .high = 1.0, .high_closed = false};

// A float key also takes a TOML integer (`lr = 1` means 1.0), as people write.
std::optional<double> as_number(const toml::node& node) {
  if (const auto* f = node.as_floating_point()) return f->get();
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  return std::nullopt;
}

template <class Access>
ConfigKey number(std::string name, Access field, Interval range, std::string doc) {
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const std::optional<double> v = as_number(node);
    if (!v) return "expected a float, got " + toml_describe(node);
    if (!range.contains(*v))
      return "expected a float" + range.text() + ", got " + toml_render(node);
    field(c) = *v;
    return std::nullopt;
  };
  auto get = [=](const ExperimentConfig& c) { return toml_float(field(c)); };
  return make_key(std::move(name), "float" + range.text(), std::move(doc), set, get);
}

// --- booleans and strings -----------------------------------------------------

template <class Access>
ConfigKey boolean(std::string name, Access field, std::string doc) {
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* value = node.as_boolean();
    if (!value) return "expected a boolean (true or false), got " + toml_describe(node);
    field(c) = value->get();
    return std::nullopt;
  };
  auto get = [=](const ExperimentConfig& c) { return std::string(field(c) ? "true" : "false"); };
  return make_key(std::move(name), "boolean", std::move(doc), set, get);
}

// What a string must look like beyond being a string; nullopt when acceptable,
// else what was expected ("a non-empty path").
using StringCheck = std::function<std::optional<std::string>(std::string_view)>;

// A value for "got ...": whole when short, else its start and its length, so
// a 50 MB path does not become a 50 MB message.
std::string quote_excerpt(std::string_view text) {
  constexpr size_t kShown = 80;
  if (text.size() <= kShown) return toml_quote(text);
  return toml_quote(text.substr(0, kShown)) + "... (" + std::to_string(text.size()) + " bytes)";
}

template <class Access>
ConfigKey string(std::string name, Access field, std::string doc, StringCheck check = nullptr) {
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* value = node.as_string();
    if (!value) return "expected a string, got " + toml_describe(node);
    if (check) {
      if (auto expected = check(value->get()))
        return "expected " + *expected + ", got " + quote_excerpt(value->get());
    }
    field(c) = value->get();
    return std::nullopt;
  };
  auto get = [=](const ExperimentConfig& c) { return toml_quote(field(c)); };
  return make_key(std::move(name), "string", std::move(doc), set, get);
}

// Linux's limits (PATH_MAX, NAME_MAX less the longest suffix headroom adds to
// a run's file names), checked here so the key is named instead of the
// filesystem's "File name too long" surfacing later.
constexpr size_t kMaxPathBytes = 4095;
constexpr size_t kMaxNameBytes = 200;

std::optional<std::string> path_or_empty(std::string_view text) {
  if (text.size() > kMaxPathBytes)
    return "a path of at most " + std::to_string(kMaxPathBytes) + " bytes";
  if (text.find('\0') != std::string_view::npos) return "a path without NUL characters";
  return std::nullopt;
}

std::optional<std::string> non_empty_path(std::string_view text) {
  if (text.empty()) return "a non-empty path";
  return path_or_empty(text);
}

// run.name becomes a folder under run.out_dir, so it must be one path component.
std::optional<std::string> folder_name(std::string_view text) {
  if (text.empty() || text == "." || text == ".." || text.find('/') != std::string_view::npos ||
      text.find('\0') != std::string_view::npos)
    return "a non-empty name without '/'";
  if (text.size() > kMaxNameBytes)
    return "a name of at most " + std::to_string(kMaxNameBytes) + " bytes (it names a folder)";
  return std::nullopt;
}

// --- closed choices -----------------------------------------------------------

template <class E>
std::vector<std::string_view> names_of() {
  return {EnumNames<E>::kNames.begin(), EnumNames<E>::kNames.end()};
}

template <class Access>
ConfigKey choice(std::string name, Access field, std::string doc) {
  using E = FieldType<Access>;
  const std::vector<std::string_view> names = names_of<E>();
  const std::string choices = quoted_choices(names);
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* value = node.as_string();
    if (!value) return "expected " + choices + ", got " + toml_describe(node);
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == value->get()) {
        field(c) = static_cast<E>(i);
        return std::nullopt;
      }
    }
    std::string complaint = "expected " + choices + ", got " + toml_quote(value->get());
    if (auto near = nearest_word(value->get(), names))
      complaint += " (did you mean " + toml_quote(*near) + "?)";
    return complaint;
  };
  auto get = [=](const ExperimentConfig& c) { return toml_quote(name_of(field(c))); };
  return make_key(std::move(name), choices, std::move(doc), set, get);
}

// --- byte sizes ---------------------------------------------------------------

// The exact unit that gives the smallest number, so an echoed config reads as
// the user wrote it ("80GiB", "80GB") and still loads back to the same bytes.
std::string render_bytes(uint64_t bytes) {
  struct Unit {
    const char* suffix;
    uint64_t size;
  };
  static constexpr Unit kUnits[] = {
      {"TiB", kTiB}, {"TB", 1000ull * 1000 * 1000 * 1000},
      {"GiB", kGiB}, {"GB", 1000ull * 1000 * 1000},
      {"MiB", kMiB}, {"MB", 1000ull * 1000},
      {"KiB", kKiB}, {"kB", 1000},
  };
  if (bytes != 0) {
    for (const Unit& unit : kUnits)
      if (bytes % unit.size == 0)
        return toml_quote(std::to_string(bytes / unit.size) + unit.suffix);
  }
  // A TOML integer is signed 64-bit; larger counts travel as a digit string.
  if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return toml_quote(std::to_string(bytes));
  return std::to_string(bytes);
}

template <class Access>
ConfigKey byte_size(std::string name, Access field, std::string doc) {
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    // No device or host has a pebibyte: past it a value is a typo ("10000000.5TB"),
    // not a capacity, and would silently mean "unlimited".
    constexpr uint64_t kMaxBytes = uint64_t{1} << 50;
    const std::string expected =
        "expected a byte size like \"80GiB\", \"1.5GB\" or an integer, at most 1 PiB, got ";
    if (const auto* integer_value = node.as_integer()) {
      if (integer_value->get() < 0 || static_cast<uint64_t>(integer_value->get()) > kMaxBytes)
        return expected + std::to_string(integer_value->get());
      field(c) = static_cast<uint64_t>(integer_value->get());
      return std::nullopt;
    }
    if (const auto* string_value = node.as_string()) {
      std::optional<uint64_t> bytes = parse_bytes(string_value->get());
      if (!bytes || *bytes > kMaxBytes) return expected + quote_excerpt(string_value->get());
      field(c) = *bytes;
      return std::nullopt;
    }
    return expected + toml_describe(node);
  };
  auto get = [=](const ExperimentConfig& c) { return render_bytes(field(c)); };
  return make_key(std::move(name),
                  "byte size <= 1 PiB: integer or \"80GiB\", \"1.5GB\", \"512MiB\"", std::move(doc),
                  set, get);
}

// --- durations ------------------------------------------------------------------

// Whole seconds as "90s", "10min", "2h" or an integer of seconds; rendered in
// the largest unit that divides them, so 600 reads back as "10min".
template <class Access>
ConfigKey duration(std::string name, Access field, int64_t max_seconds, std::string doc) {
  const std::string expected =
      "expected a duration: an integer of seconds or \"<n>s\", "
      "\"<n>min\", \"<n>h\" (n a whole number), at most " +
      std::to_string(max_seconds) + " seconds, got ";
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    if (const auto* integer_value = node.as_integer()) {
      if (integer_value->get() < 0 || integer_value->get() > max_seconds)
        return expected + std::to_string(integer_value->get());
      field(c) = integer_value->get();
      return std::nullopt;
    }
    const auto* string_value = node.as_string();
    if (!string_value) return expected + toml_describe(node);
    const std::string& text = string_value->get();
    const size_t unit_at = text.find_first_not_of("0123456789");
    const std::string unit = unit_at == std::string::npos ? "" : text.substr(unit_at);
    const int64_t scale = unit == "s" ? 1 : unit == "min" ? 60 : unit == "h" ? 3600 : 0;
    int64_t count = -1;
    if (scale > 0 && unit_at > 0 && unit_at <= 9) {
      const auto parsed = std::from_chars(text.data(), text.data() + unit_at, count);
      if (parsed.ec != std::errc() || parsed.ptr != text.data() + unit_at) count = -1;
    }
    if (count < 0 || count > max_seconds / scale) return expected + quote_excerpt(text);
    field(c) = count * scale;
    return std::nullopt;
  };
  auto get = [=](const ExperimentConfig& c) -> std::string {
    const int64_t seconds = field(c);
    if (seconds == 0) return "0";
    if (seconds % 3600 == 0) return toml_quote(std::to_string(seconds / 3600) + "h");
    if (seconds % 60 == 0) return toml_quote(std::to_string(seconds / 60) + "min");
    return toml_quote(std::to_string(seconds) + "s");
  };
  return make_key(std::move(name), "duration: seconds, \"90s\", \"10min\", \"2h\"", std::move(doc),
                  set, get);
}

// --- keys with a shape of their own ---------------------------------------------

// "none" = 0, "full" = 1, "every_<k>" = k: checkpoint every k-th block.
ConfigKey activation_checkpointing() {
  const std::string expected = "expected \"none\", \"full\" or \"every_<k>\" with k >= 1, got ";
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* value = node.as_string();
    if (!value) return expected + toml_describe(node);
    const std::string& text = value->get();
    if (text == "none") {
      c.checkpoint.activations = 0;
      return std::nullopt;
    }
    if (text == "full") {
      c.checkpoint.activations = 1;
      return std::nullopt;
    }
    constexpr std::string_view kPrefix = "every_";
    if (text.starts_with(kPrefix) && text.size() > kPrefix.size()) {
      int k = 0;
      const char* first = text.data() + kPrefix.size();
      const char* last = text.data() + text.size();
      auto [end, ec] = std::from_chars(first, last, k);
      if (ec == std::errc() && end == last && k >= 1) {
        c.checkpoint.activations = k;
        return std::nullopt;
      }
    }
    return expected + toml_quote(text);
  };
  auto get = [](const ExperimentConfig& c) {
    const int k = c.checkpoint.activations;
    if (k == 0) return toml_quote("none");
    if (k == 1) return toml_quote("full");
    return toml_quote("every_" + std::to_string(k));
  };
  return make_key("checkpoint.activations", "\"none\", \"full\" or \"every_<k>\" (k >= 1)",
                  "Activation checkpointing: keep only each checkpointed block's input and "
                  "recompute the rest in backward. \"full\" checkpoints every block, "
                  "\"every_<k>\" every k-th block, \"none\" keeps all activations.",
                  set, get);
}

// "dynamic" = 0, or a constant >= 1 (OptimizerSection::loss_scale).
ConfigKey loss_scale() {
  const std::string expected = "expected \"dynamic\" or a float >= 1 (at most 2^24), got ";
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    if (const auto* text = node.as_string()) {
      if (text->get() != "dynamic") return expected + quote_excerpt(text->get());
      c.optimizer.loss_scale = 0;
      return std::nullopt;
    }
    const std::optional<double> v = as_number(node);
    if (!v || !(*v >= 1.0 && *v <= 16777216.0)) return expected + toml_render(node);
    c.optimizer.loss_scale = *v;
    return std::nullopt;
  };
  auto get = [](const ExperimentConfig& c) {
    return c.optimizer.loss_scale == 0 ? toml_quote("dynamic") : toml_float(c.optimizer.loss_scale);
  };
  return make_key(
      "optimizer.loss_scale", "\"dynamic\" or float >= 1",
      "Loss scaling for fp16 (model.dtype = \"fp16\"), whose gradients below 2^-24 flush to zero: "
      "the loss gradient is multiplied by the scale and the gradients divided by it before "
      "clipping and the update. A constant (1 = none): a step with an inf or NaN gradient is "
      "skipped and counts towards optimizer.max_nonfinite_steps. \"dynamic\": PyTorch's "
      "GradScaler, starting at 65536, doubled after 2000 steps in a row without overflow, halved "
      "on an overflow, whose step is skipped and not counted. The scale of each step is in the "
      "trace (/steps loss_scale).",
      set, get);
}

// The projections of a Llama/Qwen block, by their Hugging Face module names.
const std::vector<std::string_view> kLoraTargets = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                    "gate_proj", "up_proj", "down_proj"};

ConfigKey lora_targets() {
  const std::string choices = quoted_choices(kLoraTargets);
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* array = node.as_array();
    if (!array) return "expected an array of module names, got " + toml_describe(node);
    std::vector<std::string> targets;
    for (const toml::node& element : *array) {
      const auto* name = element.as_string();
      if (!name)
        return "expected an array of module names, got " + toml_describe(element) + " in it";
      bool known = false;
      for (std::string_view target : kLoraTargets)
        known = known || target == name->get();
      if (!known) {
        std::string complaint =
            "expected module names from " + choices + ", got " + toml_quote(name->get());
        if (auto near = nearest_word(name->get(), kLoraTargets))
          complaint += " (did you mean " + toml_quote(*near) + "?)";
        return complaint;
      }
      for (const std::string& seen : targets)
        if (seen == name->get()) return toml_quote(seen) + " is listed twice";
      targets.push_back(name->get());
    }
    c.lora.targets = std::move(targets);
    return std::nullopt;
  };
  auto get = [](const ExperimentConfig& c) {
    std::string text = "[";
    for (const std::string& target : c.lora.targets)
      text += (text.size() > 1 ? ", " : "") + toml_quote(target);
    return text + "]";
  };
  return make_key("lora.targets", "array of " + choices,
                  "Linear layers of every block that get a LoRA adapter; the rest stay frozen "
                  "without one.",
                  set, get);
}

// memory.device: "" or a preset name, checked against the preset table so the
// two cannot disagree; a typo gets the nearest preset suggested.
ConfigKey device_preset() {
  const std::vector<std::string_view> names = device_preset_names();
  std::vector<std::string_view> spellings = {""};
  spellings.insert(spellings.end(), names.begin(), names.end());
  const std::string choices = quoted_choices(spellings);
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* value = node.as_string();
    if (!value) return "expected " + choices + ", got " + toml_describe(node);
    const std::string& text = value->get();
    if (!text.empty() && !find_device_preset(text)) {
      std::string complaint = "expected " + choices + ", got " + quote_excerpt(text);
      if (auto near = nearest_word(text, names))
        complaint += " (did you mean " + toml_quote(*near) + "?)";
      return complaint;
    }
    c.memory.device = text;
    return std::nullopt;
  };
  auto get = [](const ExperimentConfig& c) { return toml_quote(c.memory.device); };
  return make_key("memory.device", choices,
                  "The GPU the run is planned for (docs/devices.md): the capacity is the memory "
                  "a process can use on it less the CUDA context, the cuBLASLt handle and "
                  "NCCL's buffers, and the GEMM workspace follows its architecture. \"\" = "
                  "none: memory.device_capacity alone bounds the allocator.",
                  set, get);
}

// batch.buckets: "auto", or an array of increasing token counts.
ConfigKey batch_buckets() {
  const std::string expected = "expected \"auto\" or an array of increasing token counts in 1.." +
                               std::to_string(kMaxTokens) + ", got ";
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    if (const auto* text = node.as_string()) {
      if (text->get() != "auto") return expected + quote_excerpt(text->get());
      c.batch.buckets.clear();
      c.batch.auto_buckets = true;
      return std::nullopt;
    }
    const auto* array = node.as_array();
    if (!array) return expected + toml_describe(node);
    std::vector<int64_t> boundaries;
    for (const toml::node& element : *array) {
      const auto* value = element.as_integer();
      if (!value) return expected + toml_describe(element) + " in it";
      const int64_t v = value->get();
      if (v < 1 || v > kMaxTokens) return expected + std::to_string(v) + " in it";
      if (!boundaries.empty() && v <= boundaries.back())
        return expected + toml_render(node) + " (" + std::to_string(v) + " after " +
               std::to_string(boundaries.back()) + " does not increase)";
      boundaries.push_back(v);
    }
    c.batch.buckets = std::move(boundaries);
    c.batch.auto_buckets = false;
    return std::nullopt;
  };
  auto get = [](const ExperimentConfig& c) {
    if (c.batch.auto_buckets) return toml_quote("auto");
    std::string text = "[";
    for (int64_t b : c.batch.buckets)
      text += (text.size() > 1 ? ", " : "") + std::to_string(b);
    return text + "]";
  };
  return make_key("batch.buckets", "\"auto\" or array of increasing integers",
                  "Padded: length buckets, by their upper boundaries in tokens (e.g. [512, 1024, "
                  "2048]). A sample goes to the smallest bucket that holds it; a longer one is "
                  "truncated to the last bucket when data.max_sample_tokens > 0 and refused when "
                  "it is 0. Each micro-batch holds max(1, batch.max_tokens_per_micro_batch / "
                  "bucket) samples of one bucket (at most batch.micro_batch_size when that is > "
                  "0); the buckets' micro-batches are interleaved by a draw seeded by data.seed "
                  "and weighted by how many each has left. \"auto\" = at most 5 boundaries, the "
                  "last the longest sample, under which rows padded to their bucket hold the "
                  "fewest padding tokens, chosen among the sample lengths' 256-quantiles "
                  "rounded up to a multiple of 8. [] = no buckets.",
                  set, get);
}

ConfigKey adam_betas() {
  const std::string expected = "expected an array of two floats in [0, 1), got ";
  auto set = [=](ExperimentConfig& c, const toml::node& node) -> Complaint {
    const auto* array = node.as_array();
    if (!array) return expected + toml_describe(node);
    if (array->size() != 2) return expected + toml_render(node);
    std::array<double, 2> betas{};
    for (size_t i = 0; i < 2; ++i) {
      const std::optional<double> beta = as_number(*array->get(i));
      if (!beta || !kUnitHalfOpen.contains(*beta)) return expected + toml_render(node);
      betas[i] = *beta;
    }
    c.optimizer.betas = betas;
    return std::nullopt;
  };
  auto get = [](const ExperimentConfig& c) {
    return "[" + toml_float(c.optimizer.betas[0]) + ", " + toml_float(c.optimizer.betas[1]) + "]";
  };
  return make_key("optimizer.betas", "array of two floats in [0, 1)",
                  "AdamW's decay rates for the first and second moment estimates.", set, get);
}

std::vector<ConfigKey> build_schema() {
  return {
      // [run]
      string(HR_FIELD(run.name),
             "Names the run: its folder is <run.out_dir>/<run.name>/ and the trace records it.",
             folder_name),
      integer(HR_FIELD(run.seed), 0, kNoMax,
              "Seed of the randomness drawn during steps: the dropout masks (lora.dropout), "
              "which also depend on the step, the rank and the micro-batch, so a resumed run "
              "draws the same ones."),
      integer(HR_FIELD(run.steps), 1, kNoMax, "Optimizer steps to run."),
      choice(HR_FIELD(run.backend),
             "Where the math runs. \"meta\" computes nothing and allocates exactly what a real "
             "run would: `headroom plan` uses it."),
      string(HR_FIELD(run.out_dir), "Folder that holds one subfolder per run.", non_empty_path),
      duration(HR_FIELD(run.collective_timeout), 7 * 24 * 3600,
               "How long a rank waits in one collective (all-reduce, gather, barrier) before it "
               "writes what it waited for to stderr and its trace and aborts the job, so a rank "
               "that hangs (stopped, deadlocked) does not leave the others waiting forever; 0 = "
               "wait forever. Only under MPI."),

      // [model]
      string(HR_FIELD(model.preset),
             "Built-in architecture (\"tiny\", \"qwen3-8b\", ...). Set to \"\" to use "
             "model.hf_config; the default \"tiny\" applies only when model.hf_config is not "
             "given."),
      string(HR_FIELD(model.hf_config),
             "Path to a Hugging Face config.json that defines the architecture instead of "
             "model.preset.",
             path_or_empty),
      string(HR_FIELD(model.weights),
             "safetensors file or folder with Hugging Face tensor names; \"\" = random "
             "initialization from model.seed.",
             path_or_empty),
      choice(HR_FIELD(model.dtype),
             "Storage type of the weights, activations and gradients (math is fp32 inside every "
             "op). \"fp16\" overflows past 65504 and flushes below 2^-24: use "
             "optimizer.loss_scale = \"dynamic\" with it."),
      integer(HR_FIELD(model.seed), 0, kNoMax,
              "Seed of the random initialization when model.weights is \"\"."),
      choice(HR_FIELD(model.quantization),
             "\"nf4\": QLoRA. The frozen base's block projections (q, k, v, o, gate, up, down) "
             "are stored as bitsandbytes' NF4 (4-bit NormalFloat codes in blocks of 64 with an "
             "fp32 absmax each, 0.5625 bytes per weight), quantized at load and dequantized "
             "into a short-lived buffer in model.dtype for each use in forward and backward; "
             "embeddings, norms and the head stay in model.dtype. Requires lora.enabled."),
      boolean(HR_FIELD(model.double_quant),
              "With model.quantization = \"nf4\": bitsandbytes' double quantization "
              "(bnb_4bit_use_double_quant), the absmax themselves in 8 bits per block of 256 "
              "(~0.516 bytes per weight)."),

      // [lora]
      boolean(HR_FIELD(lora.enabled),
              "Train low-rank adapters only; the base weights are frozen and get no gradients "
              "or optimizer states."),
      integer(HR_FIELD(lora.rank), 0, kNoMax, "Rank r of each adapter (A: r x in, B: out x r)."),
      number(HR_FIELD(lora.alpha), kPositive, "The adapter's output is scaled by alpha / rank."),
      number(HR_FIELD(lora.dropout), kUnitHalfOpen,
             "Dropout on the adapter's input during training."),
      lora_targets(),
      choice(HR_FIELD(lora.init),
             "Initialization of A (B starts at zero, so training starts from the base model): "
             "\"kaiming_uniform\" is PEFT's default (init_lora_weights = True), \"gaussian\" "
             "draws A from N(0, 1/rank)."),
      integer(HR_FIELD(lora.seed), 0, kNoMax,
              "Seed of A's initialization (the dropout masks come from run.seed)."),

      // [data]
      string(HR_FIELD(data.path),
             "Tokenized HDF5 dataset written by data_tools/; required by `train` and `plan`.",
             path_or_empty),
      integer(HR_FIELD(data.max_sample_tokens), 0, kMaxTokens,
              "Samples longer than this are truncated to it; 0 = never truncate."),
      boolean(HR_FIELD(data.shuffle), "Shuffle sample order every epoch."),
      integer(HR_FIELD(data.seed), 0, kNoMax, "Seed of the shuffle."),
      boolean(HR_FIELD(data.synthesize_if_missing),
              "If data.path does not exist, first write a synthetic corpus there: an order-1 "
              "Markov source of known entropy over the model's vocabulary (seeded by data.seed)."),
      integer(HR_FIELD(data.synthetic_documents), 1, kNoMax, "Documents in the synthetic corpus."),
      string(HR_FIELD(data.synthetic_lengths),
             "Lengths of the synthetic documents, as `headroom data synth --lengths` takes them: "
             "fixed:L, uniform:A-B, lognormal:MEDIAN,SIGMA,MIN-MAX or histogram:A-B:W,C-D:W,..."),

      // [batch]
      choice(HR_FIELD(batch.mode),
             "\"packed\": samples are concatenated into token-budget bins (THD, cu_seqlens), no "
             "padding. \"padded\": micro_batch_size samples padded to one length ([B, S])."),
      choice(HR_FIELD(batch.packing),
             "Packed: \"first_fit\": each sample joins the first bin of its window with room. "
             "\"first_fit_decreasing\": the window is sorted longest first, then first_fit "
             "(fullest bins; long samples lead each window). \"next_fit\": only the newest bin "
             "is tried (the shuffled order is kept exactly)."),
      integer(HR_FIELD(batch.packing_window), 0, kNoMax,
              "Packed: consecutive samples (of the shuffled order) packed together; bins never "
              "mix windows. 0 = the whole epoch."),
      integer(HR_FIELD(batch.max_tokens_per_micro_batch), 1, kMaxTokens,
              "Packed: token budget of one micro-batch, filled first-fit; a longer sample gets a "
              "micro-batch of its own. Padded with batch.buckets or batch.group_pool: the budget "
              "after padding."),
      integer(HR_FIELD(batch.pad_to_multiple_of), 0, kMaxTokens,
              "Packed: each micro-batch is padded up to a multiple of this many tokens (never "
              "past max_tokens_per_micro_batch), the padding one segment of its own that no "
              "sample attends to and that has no loss. Padded: the row length (the longest "
              "row, batch.seq_len or the bucket's) is rounded up to a multiple of it, as Hugging "
              "Face's pad_to_multiple_of does. Micro-batches then repeat a few token counts, "
              "and the cpu backend's gemm kernels, made (JIT-compiled) once per shape, are "
              "reused instead of made anew for nearly every step. 0 = no padding."),
      integer(HR_FIELD(batch.micro_batch_size), 0, kNoMax,
              "Samples per micro-batch. Padded: required, >= 1, unless batch.buckets or "
              "batch.group_pool is set, where it caps the rows (0 = no cap). Packed: a cap on "
              "samples per bin, 0 = no "
              "cap."),
      integer(HR_FIELD(batch.grad_accum), 1, kNoMax,
              "Micro-batches whose gradients are summed into one optimizer step, per "
              "data-parallel rank: a step trains on (data-parallel ranks) * grad_accum "
              "micro-batches."),
      integer(HR_FIELD(batch.global_micro_batches), 0, kNoMax,
              "Micro-batches per optimizer step over all data-parallel ranks (DeepSpeed's "
              "train_batch_size, counted in micro-batches): each rank accumulates "
              "global_micro_batches / (data-parallel ranks), which must be a whole number. "
              "The step then trains on the same micro-batches whatever the world size, so a "
              "run requeued onto another number of nodes (checkpoint.resume = \"auto\") "
              "continues the same training, up to rounding. 0 = batch.grad_accum per rank."),
      integer(HR_FIELD(batch.seq_len), 0, kMaxTokens,
              "Padded: every sample is padded to this length; 0 = to the longest sample of the "
              "micro-batch."),
      batch_buckets(),
      choice(HR_FIELD(batch.pad_to),
             "Padded with batch.buckets: rows are padded to their bucket's length (\"bucket\": "
             "few distinct shapes, which the caching allocator reuses) or to the longest row of "
             "the micro-batch (\"longest\": less padding, more shapes). Without buckets rows "
             "are padded to the longest (or batch.seq_len) either way."),
      integer(HR_FIELD(batch.group_pool), 0, kNoMax,
              "Padded: length grouping, as Hugging Face's LengthGroupedSampler (whose megabatch "
              "is 50) and fairseq's batch_by_size do. The shuffled samples are taken in pools "
              "worth this many micro-batches (until their rows, rounded up to "
              "batch.pad_to_multiple_of, reach batch.group_pool * "
              "batch.max_tokens_per_micro_batch tokens); each pool is sorted longest first and "
              "cut into micro-batches of as many rows as fit batch.max_tokens_per_micro_batch "
              "after padding to their longest row (at most batch.micro_batch_size when that is "
              "> 0; a longer sample gets a micro-batch of its own), and the epoch's "
              "micro-batches are shuffled, seeded by data.seed. 0 = off."),

      // [attention]
      choice(HR_FIELD(attention.backend),
             "\"block_sparse\": flash attention over the mask's nonzero blocks, saves only the "
             "logsumexp. \"dense_additive\": what PyTorch's SDPA math fallback (2.5+) does "
             "under Hugging Face's 4-D additive mask: the mask [B, 1, S, S] in the model dtype "
             "once per micro-batch, and per layer fp32 scores, softmax and probabilities "
             "[B, H, S, S] (the probabilities saved for backward), every tensor of that path "
             "allocated in its order (docs/backend.md, dense_attention). Padded batches are "
             "[B, S]; a packed micro-batch is one row of all its tokens. Same values as "
             "block_sparse; about 20x slower on cpu."),
      choice(HR_FIELD(attention.mask),
             "Which keys each query sees. \"document\": causal within each packed document (a "
             "padded row is one document). \"causal\": one causal sequence over the whole pack, "
             "across document boundaries (what naive packing does; packed mode only). "
             "\"sliding_window\": causal within the document, the last attention.window tokens. "
             "\"dflash_block\": each document cut into blocks of attention.mask_block tokens, "
             "bidirectional within a block, every earlier block of the document visible, no "
             "later one (DFlash-LoRA's block-diffusion mask)."),
      integer(HR_FIELD(attention.block_size), 1, 128,
              "Tile edge of the block-sparse kernel (queries and keys alike); changes speed, "
              "never the mask. At most 128: the cpu kernel keeps its tiles on each thread's "
              "stack."),
      integer(HR_FIELD(attention.window), 0, kMaxTokens,
              "\"sliding_window\": tokens each query attends to, itself included; 0 for the "
              "other masks."),
      integer(HR_FIELD(attention.mask_block), 0, kMaxTokens,
              "\"dflash_block\": tokens per block (DFlash's block_size, e.g. 16); no default, "
              "0 for the other masks."),

      // [loss]
      integer(HR_FIELD(loss.chunk_size), 0, kMaxTokens,
              "Tokens per chunk of the fused linear + cross-entropy; 0 = all logits at once."),
      choice(HR_FIELD(loss.mode),
             "\"save\" keeps every chunk's softmax for backward (chunking alone saves nothing); "
             "\"recompute\" keeps only the logsumexp and recomputes logits in backward."),
      choice(HR_FIELD(loss.logits_dtype), "Type of the logits and softmax (\"fp32\" upcasts)."),

      // [memory]
      device_preset(),
      byte_size(HR_FIELD(memory.device_capacity),
                "Allocations past this many bytes raise an out-of-memory postmortem, as on a "
                "device of that size; 0 = unlimited (the device's own size on cuda). With "
                "memory.device: a tighter cap than the preset leaves, e.g. for memory another "
                "process holds."),
      choice(HR_FIELD(memory.allocator),
             "\"caching\": PyTorch's rounding, pools and segments, so reserved > allocated as in "
             "PyTorch. \"exact\": every block exactly its size."),

      // [zero]
      integer(HR_FIELD(zero.stage), 0, 3,
              "ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also parameters."),
      integer(HR_FIELD(zero.prefetch), 0, kNoMax,
              "Stage 3: blocks gathered ahead of the one computing."),
      boolean(HR_FIELD(zero.offload_optimizer),
              "Keep optimizer states (and the update) in host memory."),

      // [parallel]
      integer(HR_FIELD(parallel.tensor), 1, kNoMax,
              "Tensor parallelism: groups of this many consecutive ranks hold one model "
              "between them (Megatron-LM's layout: q, k, v, gate and up split by output rows, o "
              "and down by input columns, heads divided, the embedding, head and loss "
              "vocab-parallel); ZeRO and the data are over the groups. It must divide the job's "
              "ranks and the model's heads, kv heads, intermediate_size and vocab_size. cpu over "
              "MPI (model.weights: each rank loads its part; checkpoints of either format "
              "resume on any parallel.tensor and data-parallel size; LoRA adapters split like "
              "their projections); not yet with NF4 or LoRA dropout on o/down."),

      boolean(HR_FIELD(parallel.sequence),
              "Sequence parallelism inside each tensor-parallel group (Megatron): the residual "
              "stream, the norms and the block inputs activation checkpointing keeps hold T/N "
              "tokens per rank; each sublayer all-gathers its normed input and reduce-scatters "
              "its output instead of all-reducing it (the same bytes)."),

      // [checkpoint]
      activation_checkpointing(),
      integer(HR_FIELD(checkpoint.save_every), 0, kNoMax,
              "Steps between saved checkpoints; 0 = none during the run."),
      string(HR_FIELD(checkpoint.dir),
             "Where checkpoints go; \"\" = <run.out_dir>/<run.name>/checkpoints. `--overwrite` "
             "of a run removes the step-N folders its earlier run left here.",
             path_or_empty),
      choice(HR_FIELD(checkpoint.format),
             "\"sharded\": every rank writes its own shard of the weights and optimizer state at "
             "once, nothing gathered (`headroom export --checkpoint` assembles the Hugging Face "
             "file; not with lora.enabled). \"consolidated\": model.safetensors with Hugging Face "
             "tensor names, written by rank 0. Either resumes on another world size "
             "(docs/cli.md)."),
      boolean(HR_FIELD(checkpoint.save_initial), "Also save before the first step."),
      string(HR_FIELD(checkpoint.resume_from),
             "A checkpoint folder (<checkpoint.dir>/step-N) to continue from: weights, AdamW "
             "state, step counts and the data cursor are restored and the run goes on with step "
             "N + 1, writing trace.rank0.from-step-N.h5 beside the earlier trace. \"\" = start "
             "afresh.",
             path_or_empty),
      choice(HR_FIELD(checkpoint.resume),
             "\"auto\": continue from the newest complete checkpoint in checkpoint.dir that "
             "was written with this same config (a requeued job), or start afresh when there is "
             "none; the last step is then always checkpointed. \"never\": start afresh unless "
             "checkpoint.resume_from is set."),

      // [optimizer]
      choice(HR_FIELD(optimizer.kind),
             "\"adamw\": torch.optim.AdamW, fp32 moments (8 bytes per parameter). "
             "\"adamw_8bit\": bitsandbytes' AdamW8bit, moments in blockwise 8-bit dynamic "
             "quantization (1 byte each plus one fp32 absmax per 256 elements, ~2.03 bytes per "
             "parameter); parameters of fewer than 4096 elements keep fp32 moments, as "
             "bitsandbytes' min_8bit_size does."),
      number(HR_FIELD(optimizer.lr), kPositive, "Peak learning rate of AdamW."),
      adam_betas(),
      number(HR_FIELD(optimizer.eps), kPositive, "AdamW's epsilon."),
      number(HR_FIELD(optimizer.weight_decay), kNonNegative, "Decoupled weight decay."),
      number(HR_FIELD(optimizer.grad_clip), kNonNegative,
             "Clip the global gradient norm to this; 0 = no clipping."),
      choice(HR_FIELD(optimizer.master_dtype),
             "The copy of bf16 or fp16 weights the update is made on: \"fp32\" (mixed "
             "precision, 4 bytes per parameter), \"bf16\" (a bf16 copy of bf16 weights, 2 "
             "bytes), \"none\" (the 16-bit weights are updated in place, rounded to nearest "
             "once per step; 0 bytes). The moments stay fp32 either way. fp32 weights are their "
             "own master: \"none\" is \"fp32\" for them."),
      integer(HR_FIELD(optimizer.max_nonfinite_steps), 0, kNoMax,
              "Consecutive steps skipped for a non-finite loss or gradient after which the run "
              "stops with exit code 4; 0 = never stop early. A run none of whose steps was "
              "finite exits 4 either way."),
      loss_scale(),

      // [schedule]
      integer(HR_FIELD(schedule.warmup_steps), 0, kNoMax,
              "Steps of linear warmup from 0 to optimizer.lr."),
      choice(HR_FIELD(schedule.decay), "Decay from optimizer.lr to schedule.min_lr after warmup."),
      number(HR_FIELD(schedule.min_lr), kNonNegative, "Learning rate at the last step."),

      // [trace]
      boolean(HR_FIELD(trace.memory_events),
              "Record every allocation and free in /memory/events (the per-step peaks are always "
              "recorded)."),
      integer(HR_FIELD(trace.flush_every), 1, kNoMax,
              "Steps between flushes of the HDF5 trace; a killed run keeps every flushed step."),
  };
}

#undef HR_FIELD

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = build_schema();
  return schema;
}

const ConfigKey* find_config_key(std::string_view name) {
  for (const ConfigKey& key : config_schema())
    if (key.name == name) return &key;
  return nullptr;
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> names;
    for (const ConfigKey& key : config_schema())
      if (names.empty() || names.back() != key.section()) names.emplace_back(key.section());
    return names;
  }();
  return sections;
}

}  // namespace headroom
