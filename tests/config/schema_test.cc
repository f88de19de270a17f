// The schema table and what is generated from it: to_toml() round trips, the
// reference in docs/config.md, and the per-key setters and getters.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/schema.h"
#include "test_util/source_tree.h"
#include "util/bytes.h"
#include "util/error.h"

namespace headroom {
namespace {

// A config in which every key differs from its default, and which obeys every rule.
ExperimentConfig everything_changed() {
  ExperimentConfig c;
  c.run = {.name = "a \"quoted\" name \\ with ünïcode\t",
           .seed = 7,
           .steps = 1000,
           .backend = RunSection::Backend::kMeta,
           .out_dir = "/scratch/results",
           .collective_timeout = 90};
  c.model = {.preset = "",
             .hf_config = "models/qwen3-8b/config.json",
             .weights = "models/qwen3-8b",
             .dtype = Precision::kBf16,
             .seed = 99};
  c.lora = {
      .enabled = true,
      .rank = 8,
      .alpha = 16.5,
      .dropout = 0.05,
      .targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
      .init = LoraSection::Init::kGaussian,
      .seed = 12};
  c.data = {.path = "data/train.h5",
            .max_sample_tokens = 4096,
            .shuffle = false,
            .seed = 5,
            .synthesize_if_missing = true,
            .synthetic_documents = 77,
            .synthetic_lengths = "histogram:6000-8000:3,22000-26000:1"};
  c.batch = {.mode = BatchSection::Mode::kPadded,
             .packing = BatchSection::Packing::kNextFit,
             .packing_window = 128,
             .max_tokens_per_micro_batch = 16384,
             .pad_to_multiple_of = 64,
             .micro_batch_size = 4,
             .grad_accum = 8,
             .seq_len = 2048,
             .buckets = {},
             .auto_buckets = false,
             .pad_to = BatchSection::PadTo::kLongest};
  c.attention = {.backend = AttentionSection::Backend::kDenseAdditive,
                 .mask = AttentionSection::Mask::kSlidingWindow,
                 .block_size = 128,
                 .window = 1024};
  c.loss = {.chunk_size = 1024, .mode = LossSection::Mode::kSave, .logits_dtype = Precision::kBf16};
  // device_capacity stays below what the preset leaves (rule in rules.cc).
  c.memory = {.device = "h100-80gb",
              .device_capacity = 40 * kGiB,
              .allocator = MemorySection::Allocator::kExact};
  c.zero = {.stage = 3, .prefetch = 2, .offload_optimizer = true};
  c.parallel = {.tensor = 2, .sequence = true};
  c.checkpoint = {.activations = 3,
                  .save_every = 100,
                  .dir = "/ckpt",
                  .format = CheckpointSection::Format::kSharded,
                  .save_initial = true,
                  .resume_from = "/ckpt/step-100"};
  c.optimizer = {.kind = OptimizerSection::Kind::kAdamw8bit,
                 .lr = 1.7e-5,
                 .betas = {0.8, 0.999},
                 .eps = 1e-6,
                 .weight_decay = 0.0,
                 .grad_clip = 0.5,
                 .master_dtype = OptimizerSection::Master::kBf16,
                 .max_nonfinite_steps = 3,
                 .loss_scale = 0};
  c.schedule = {
      .warmup_steps = 100, .decay = ScheduleSection::Decay::kConstant, .min_lr = 1.0 / 3.0 * 1e-5};
  c.trace = {.memory_events = false, .flush_every = 10};
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// --- the table itself -----------------------------------------------------------

// The design sketch's sections, and [parallel] (issue 43: tensor parallelism).
TEST(ConfigSchema, SectionsAreThoseOfTheDesignSketch) {
  EXPECT_EQ(config_sections(),
            (std::vector<std::string>{"run", "model", "lora", "data", "batch", "attention", "loss",
                                      "memory", "zero", "parallel", "checkpoint", "optimizer",
                                      "schedule", "trace"}));
}

TEST(ConfigSchema, HasEveryKeyOfTheDesignSketch) {
  // DESIGN.md's "Experiment config (TOML), sketch", plus the keys the sketch
  // implies (model.seed, batch.seq_len, checkpoint.save_initial).
  for (const char* name : {"run.name",
                           "run.seed",
                           "run.steps",
                           "run.backend",
                           "run.out_dir",
                           "model.preset",
                           "model.hf_config",
                           "model.weights",
                           "model.dtype",
                           "model.seed",
                           "lora.enabled",
                           "lora.rank",
                           "lora.alpha",
                           "lora.dropout",
                           "lora.targets",
                           "lora.init",
                           "lora.seed",
                           "data.path",
                           "data.max_sample_tokens",
                           "data.shuffle",
                           "data.seed",
                           "data.synthesize_if_missing",
                           "data.synthetic_documents",
                           "data.synthetic_lengths",
                           "batch.mode",
                           "batch.max_tokens_per_micro_batch",
                           "batch.micro_batch_size",
                           "batch.grad_accum",
                           "batch.seq_len",
                           "attention.backend",
                           "attention.mask",
                           "attention.block_size",
                           "attention.window",
                           "loss.chunk_size",
                           "loss.mode",
                           "loss.logits_dtype",
                           "memory.device",
                           "memory.device_capacity",
                           "memory.allocator",
                           "zero.stage",
                           "zero.prefetch",
                           "zero.offload_optimizer",
                           "checkpoint.activations",
                           "checkpoint.save_every",
                           "checkpoint.dir",
                           "checkpoint.format",
                           "checkpoint.save_initial",
                           "optimizer.kind",
                           "optimizer.lr",
                           "optimizer.betas",
                           "optimizer.eps",
                           "optimizer.weight_decay",
                           "optimizer.grad_clip",
                           "optimizer.master_dtype",
                           "schedule.warmup_steps",
                           "schedule.decay",
                           "schedule.min_lr",
                           "trace.memory_events",
                           "trace.flush_every"}) {
    EXPECT_NE(find_config_key(name), nullptr) << name;
  }
  EXPECT_EQ(find_config_key("attention.block_sise"), nullptr);
}

TEST(ConfigSchema, EveryKeyIsNamedTypedAndDocumentedOnce) {
  std::set<std::string> seen;
  for (const ConfigKey& key : config_schema()) {
    EXPECT_TRUE(seen.insert(key.name).second) << "duplicate " << key.name;
    EXPECT_EQ(std::count(key.name.begin(), key.name.end(), '.'), 1) << key.name;
    EXPECT_FALSE(key.section().empty()) << key.name;
    EXPECT_FALSE(key.leaf().empty()) << key.name;
    EXPECT_FALSE(key.type.empty()) << key.name;
    EXPECT_GT(key.doc.size(), 10u) << key.name;
    EXPECT_EQ(key.default_text, key.get(ExperimentConfig{})) << key.name;
  }
}

TEST(ConfigSchema, RulesNameRealKeys) {
  for (const ConfigRule& rule : config_rules()) {
    EXPECT_NE(find_config_key(rule.key), nullptr) << rule.key;
    EXPECT_NE(find_config_key(rule.other), nullptr) << rule.other;
    EXPECT_FALSE(rule.doc.empty()) << rule.key;
    EXPECT_EQ(rule.check(ExperimentConfig{}), std::nullopt) << "defaults break " << rule.doc;
  }
}

TEST(ConfigSchema, RejectedValueLeavesTheConfigUntouched) {
  // A table is the wrong type for every key; and an array with one bad element
  // must not leave the good elements half-written.
  const toml::table wrong = toml::parse("v = { a = 1 }\nt = [\"k_proj\", 5]\n");
  for (const ConfigKey& key : config_schema()) {
    ExperimentConfig c;
    EXPECT_NE(key.set(c, *wrong.get("v")), std::nullopt) << key.name;
    EXPECT_EQ(c, ExperimentConfig{}) << key.name;
  }
  ExperimentConfig c;
  EXPECT_NE(find_config_key("lora.targets")->set(c, *wrong.get("t")), std::nullopt);
  EXPECT_EQ(c.lora.targets, ExperimentConfig{}.lora.targets);
}

// batch.buckets and batch.seq_len exclude each other (rules.cc), so the
// buckets change in a config of their own.
ExperimentConfig bucketed() {
  ExperimentConfig c = everything_changed();
  c.batch.seq_len = 0;
  c.batch.buckets = {512, 1024, 8192};
  c.batch.pad_to = BatchSection::PadTo::kLongest;
  // checkpoint.resume = "auto" excludes resume_from (rules.cc) too.
  c.checkpoint.resume_from = "";
  c.checkpoint.resume = CheckpointSection::Resume::kAuto;
  return c;
}

// batch.group_pool excludes batch.seq_len and buckets (rules.cc), so the
// length grouping changes in a config of its own.
ExperimentConfig grouped() {
  ExperimentConfig c = everything_changed();
  c.batch.seq_len = 0;
  c.batch.group_pool = 50;
  return c;
}

// batch.global_micro_batches excludes batch.grad_accum > 1 (rules.cc).
ExperimentConfig globally_batched() {
  ExperimentConfig c = everything_changed();
  c.batch.grad_accum = 1;
  c.batch.global_micro_batches = 12;
  return c;
}

// attention.window and attention.mask_block each belong to one mask kind
// (rules.cc), so the dflash block changes in a config of its own.
ExperimentConfig dflash() {
  ExperimentConfig c = everything_changed();
  c.attention.mask = AttentionSection::Mask::kDflashBlock;
  c.attention.window = 0;
  c.attention.mask_block = 16;
  return c;
}

// model.quantization = "nf4" keeps the base whole on every rank, so it
// excludes zero.stage = 3 (rules.cc): the NF4 keys change in a config of
// their own.
ExperimentConfig quantized() {
  ExperimentConfig c = everything_changed();
  c.zero.stage = 2;
  c.model.quantization = ModelSection::Quantization::kNf4;
  c.model.double_quant = true;
  return c;
}

TEST(ConfigSchema, EveryGetterReadsBackThroughItsSetter) {
  const ExperimentConfig changed = everything_changed();
  const ExperimentConfig with_buckets = bucketed();
  const ExperimentConfig with_dflash = dflash();
  const ExperimentConfig with_nf4 = quantized();
  const ExperimentConfig with_grouping = grouped();
  const ExperimentConfig with_global_batch = globally_batched();
  for (const ConfigKey& key : config_schema()) {
    const bool own = key.name == "batch.buckets" || key.name == "checkpoint.resume";
    const bool nf4 = key.name == "model.quantization" || key.name == "model.double_quant";
    const std::string text = key.get(key.name == "attention.mask_block"         ? with_dflash
                                     : own                                      ? with_buckets
                                     : nf4                                      ? with_nf4
                                     : key.name == "batch.group_pool"           ? with_grouping
                                     : key.name == "batch.global_micro_batches" ? with_global_batch
                                                                                : changed);
    EXPECT_NE(text, key.default_text) << key.name << ": the round-trip config leaves it default";
    const toml::table parsed = toml::parse("v = " + text);
    ExperimentConfig c;
    EXPECT_EQ(key.set(c, *parsed.get("v")), std::nullopt) << key.name << " = " << text;
    EXPECT_EQ(key.get(c), text) << key.name;
  }
}

TEST(ConfigSchema, CollectiveTimeoutTakesSecondsOrADuration) {
  const ConfigKey* key = find_config_key("run.collective_timeout");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->default_text, "\"10min\"");
  for (const auto& [value, seconds] : std::vector<std::pair<std::string, int64_t>>{
           {"0", 0}, {"5", 5}, {"\"5s\"", 5}, {"\"10min\"", 600}, {"\"2h\"", 7200}}) {
    const toml::table parsed = toml::parse("v = " + value);
    ExperimentConfig c;
    EXPECT_EQ(key->set(c, *parsed.get("v")), std::nullopt) << value;
    EXPECT_EQ(c.run.collective_timeout, seconds) << value;
  }
  for (const char* value : {"-1", "\"5\"", "\"1.5h\"", "\"s\"", "\"10 min\"", "\"3d\"",
                            "\"999999999999h\"", "1.5", "true"}) {
    const toml::table parsed = toml::parse(std::string("v = ") + value);
    ExperimentConfig c;
    const auto complaint = key->set(c, *parsed.get("v"));
    ASSERT_NE(complaint, std::nullopt) << value;
    EXPECT_NE(complaint->find("expected a duration"), std::string::npos) << *complaint;
  }
}

TEST(ConfigRules, ResumeAutoAndResumeFromExcludeEachOther) {
  try {
    load_config_string("[checkpoint]\nresume = \"auto\"\nresume_from = \"x/step-2\"\n", "r.toml");
    FAIL() << "accepted both";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.resume: \"auto\" picks the checkpoint itself"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(load_config_string("[checkpoint]\nresume = \"auto\"\n", "r.toml").checkpoint.resume,
            CheckpointSection::Resume::kAuto);
}

// --- to_toml ------------------------------------------------------------------------

TEST(ConfigToToml, DefaultsRoundTrip) {
  const std::string text = to_toml(ExperimentConfig{});
  EXPECT_EQ(load_config_string(text, "resolved.toml"), ExperimentConfig{});
  EXPECT_EQ(text.substr(0, 32), "[run]\nname = \"quickstart\"\nseed =");
  EXPECT_NE(text.find("\n[memory]\ndevice = \"\"\ndevice_capacity = 0\nallocator = \"caching\"\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nactivations = \"none\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbetas = [0.9, 0.95]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\neps = 1e-08\n"), std::string::npos) << text;
}

TEST(ConfigToToml, EveryKeyIsRendered) {
  const std::string text = to_toml(ExperimentConfig{});
  for (const std::string& section : config_sections())
    EXPECT_NE(text.find("[" + section + "]\n"), std::string::npos) << section;
  for (const ConfigKey& key : config_schema())
    EXPECT_NE(text.find("\n" + std::string(key.leaf()) + " = "), std::string::npos) << key.name;
}

TEST(ConfigToToml, NonDefaultConfigRoundTrips) {
  const ExperimentConfig c = everything_changed();
  const std::string text = to_toml(c);
  const ExperimentConfig back = load_config_string(text, "resolved.toml");
  EXPECT_EQ(back, c) << text;
  EXPECT_EQ(to_toml(back), text);
  EXPECT_NE(text.find("device = \"h100-80gb\"\ndevice_capacity = \"40GiB\"\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("activations = \"every_3\"\n"), std::string::npos) << text;
  for (ExperimentConfig other : {bucketed(), everything_changed()}) {
    if (other.batch.buckets.empty() && other.batch.mode == BatchSection::Mode::kPadded) {
      other.batch.seq_len = 0;
      other.batch.auto_buckets = true;
    }
    const std::string other_text = to_toml(other);
    EXPECT_EQ(load_config_string(other_text, "resolved.toml"), other) << other_text;
  }
  EXPECT_NE(to_toml(bucketed()).find("buckets = [512, 1024, 8192]\npad_to = \"longest\"\n"),
            std::string::npos);
}

TEST(ConfigToToml, ByteSizesKeepTheirUnitAndEveryByte) {
  for (uint64_t bytes :
       std::initializer_list<uint64_t>{80 * kGiB, 80'000'000'000ull, 1'500'000'000ull, 12'345ull,
                                       3 * kKiB + 1, (uint64_t{1} << 50) - 1, uint64_t{1} << 50}) {
    ExperimentConfig c;
    c.memory.device_capacity = bytes;
    EXPECT_EQ(load_config_string(to_toml(c), "resolved.toml").memory.device_capacity, bytes);
  }
  ExperimentConfig c;
  c.memory.device_capacity = 80'000'000'000ull;
  EXPECT_NE(to_toml(c).find("device_capacity = \"80GB\"\n"), std::string::npos);
  c.memory.device_capacity = 12'345;
  EXPECT_NE(to_toml(c).find("device_capacity = 12345\n"), std::string::npos);
}

// --- the reference in docs/config.md ------------------------------------------------

TEST(ConfigReference, ListsEveryKeyAndRule) {
  const std::string reference = config_reference_markdown();
  for (const ConfigKey& key : config_schema())
    EXPECT_NE(reference.find("| `" + key.name + "` |"), std::string::npos) << key.name;
  for (const ConfigRule& rule : config_rules())
    EXPECT_NE(reference.find("- " + rule.doc + "\n"), std::string::npos) << rule.doc;
}

TEST(ConfigReference, TableRowsHaveFourCells) {
  // An unescaped '|' inside a doc string would silently split a cell.
  std::istringstream lines(config_reference_markdown());
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '|') continue;
    int bars = 0;
    for (size_t i = 0; i < line.size(); ++i)
      bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(bars, 5) << line;
  }
}

TEST(ConfigReference, DocsEmbedTheGeneratedReferenceVerbatim) {
  const std::string docs = read_file(testing::source_dir() + "/docs/config.md");
  ASSERT_FALSE(docs.empty()) << "docs/config.md is missing";
  const std::string begin = "<!-- BEGIN config_reference_markdown() -->\n";
  const std::string end = "<!-- END config_reference_markdown() -->";
  const size_t from = docs.find(begin);
  const size_t to = docs.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/config.md lacks the marker " << begin;
  ASSERT_NE(to, std::string::npos) << "docs/config.md lacks the marker " << end;
  const std::string embedded = docs.substr(from + begin.size(), to - from - begin.size());
  const std::string generated = config_reference_markdown();
  if (embedded != generated) {
    // Leave the fresh reference where it can be pasted in from.
    const std::string fresh = testing::binary_dir() + "/config_reference.md";
    std::ofstream(fresh) << generated;
    ADD_FAILURE() << "docs/config.md is out of date with the schema: paste " << fresh
                  << " between its markers";
  }
  for (const ConfigKey& key : config_schema())
    EXPECT_NE(docs.find("`" + key.name + "`"), std::string::npos) << key.name;
}

}  // namespace
}  // namespace headroom
