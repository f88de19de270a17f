// Which changes the catalogue offers for a config: only those that differ
// from it and can lower memory, each as --set values the loader accepts.
#include <gtest/gtest.h>

#include <algorithm>

#include "config/knobs.h"
#include "config/schema.h"

namespace headroom {
namespace {

std::vector<std::string> all_overrides(const std::vector<Knob>& knobs) {
  std::vector<std::string> out;
  for (const Knob& k : knobs)
    for (const std::string& o : k.overrides)
      out.push_back(o);
  return out;
}

bool has(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

ExperimentConfig gpu_config() {
  return load_config_string(R"(
[run]
backend = "cuda"
[model]
preset = "qwen3-4b"
dtype = "bf16"
[data]
path = "x.h5"
[batch]
mode = "packed"
max_tokens_per_micro_batch = 4096
[loss]
chunk_size = 1024
mode = "save"
)",
                            "test");
}

TEST(KnobCatalogue, OffersEachKnobThatDiffersFromTheConfig) {
  const ExperimentConfig c = gpu_config();
  const std::vector<std::string> sets = all_overrides(knob_catalogue(c, 1, {}));
  EXPECT_TRUE(has(sets, "checkpoint.activations=full"));
  EXPECT_TRUE(has(sets, "checkpoint.activations=every_2"));
  EXPECT_TRUE(has(sets, "loss.mode=recompute"));
  EXPECT_TRUE(has(sets, "loss.logits_dtype=bf16"));
  EXPECT_TRUE(has(sets, "zero.offload_optimizer=true"));
  EXPECT_TRUE(has(sets, "batch.max_tokens_per_micro_batch=2048"));
  EXPECT_TRUE(has(sets, "batch.grad_accum=2"));
  EXPECT_TRUE(has(sets, "lora.enabled=true"));
  EXPECT_TRUE(has(sets, "memory.allocator=exact"));
  EXPECT_TRUE(has(sets, "optimizer.master_dtype=none"));
  EXPECT_TRUE(has(sets, "optimizer.kind=adamw_8bit"));
  EXPECT_FALSE(has(sets, "attention.backend=block_sparse")) << "block_sparse already";
  ExperimentConfig dense = c;
  dense.attention.backend = AttentionSection::Backend::kDenseAdditive;
  EXPECT_TRUE(has(all_overrides(knob_catalogue(dense, 1, {})), "attention.backend=block_sparse"));
  const std::vector<Knob> knobs = knob_catalogue(c, 1, {});
  EXPECT_FALSE(std::any_of(knobs.begin(), knobs.end(), [](const Knob& k) {
    return k.overrides.size() == 1 && k.overrides.front().starts_with("zero.stage");
  })) << "one rank: no stage to shard over";
  EXPECT_TRUE(has(sets, "zero.stage=1")) << "offload needs stage 1";
  EXPECT_FALSE(std::any_of(sets.begin(), sets.end(), [](const std::string& s) {
    return s.starts_with("data.max_sample_tokens");
  })) << "no lengths given";
}

TEST(KnobCatalogue, LeavesOutWhatTheConfigAlreadyDoes) {
  ExperimentConfig c = gpu_config();
  c.checkpoint.activations = 1;
  c.loss.mode = LossSection::Mode::kRecompute;
  c.zero.offload_optimizer = true;
  c.memory.allocator = MemorySection::Allocator::kExact;
  c.optimizer.master_dtype = OptimizerSection::Master::kNone;
  c.optimizer.kind = OptimizerSection::Kind::kAdamw8bit;
  const std::vector<std::string> sets = all_overrides(knob_catalogue(c, 2, {}));
  EXPECT_FALSE(has(sets, "checkpoint.activations=full"));
  EXPECT_FALSE(has(sets, "checkpoint.activations=every_2"));
  EXPECT_FALSE(has(sets, "loss.mode=recompute"));
  EXPECT_TRUE(has(sets, "loss.chunk_size=512")) << "recompute already: a smaller chunk";
  EXPECT_FALSE(has(sets, "zero.offload_optimizer=true"));
  EXPECT_FALSE(has(sets, "memory.allocator=exact"));
  EXPECT_FALSE(has(sets, "optimizer.master_dtype=none"));
  EXPECT_FALSE(has(sets, "optimizer.kind=adamw_8bit"));
  EXPECT_TRUE(has(sets, "zero.stage=1")) << "two ranks at stage 0";
}

TEST(KnobCatalogue, OffersTensorParallelGroupsTheRanksDivideInto) {
  const ExperimentConfig c = gpu_config();
  EXPECT_FALSE(has(all_overrides(knob_catalogue(c, 1, {})), "parallel.tensor=2"));
  EXPECT_FALSE(has(all_overrides(knob_catalogue(c, 3, {})), "parallel.tensor=2"));
  const std::vector<Knob> knobs = knob_catalogue(c, 4, {});
  const auto tp = std::find_if(knobs.begin(), knobs.end(), [](const Knob& k) {
    return !k.overrides.empty() && k.overrides.front() == "parallel.tensor=2";
  });
  ASSERT_NE(tp, knobs.end());
  // Half the data-parallel ranks: twice the accumulation, the same tokens.
  EXPECT_EQ(tp->overrides, (std::vector<std::string>{"parallel.tensor=2", "batch.grad_accum=2"}));
  EXPECT_FALSE(has(all_overrides(knob_catalogue(c, 4, {})), "parallel.sequence=true"));
  ExperimentConfig grouped = c;
  grouped.parallel.tensor = 2;
  EXPECT_TRUE(has(all_overrides(knob_catalogue(grouped, 4, {})), "parallel.tensor=4"));
  EXPECT_TRUE(has(all_overrides(knob_catalogue(grouped, 4, {})), "parallel.sequence=true"));
  EXPECT_FALSE(has(all_overrides(knob_catalogue(grouped, 2, {})), "parallel.tensor=4"));
}

TEST(KnobCatalogue, DoublesTheGlobalMicroBatchesWhenTheConfigCountsThem) {
  ExperimentConfig c = gpu_config();
  c.batch.global_micro_batches = 4;
  const std::vector<Knob> knobs = knob_catalogue(c, 4, {});
  // The data-parallel ranks halve, each accumulates twice as much by itself.
  const auto tp = std::find_if(knobs.begin(), knobs.end(), [](const Knob& k) {
    return !k.overrides.empty() && k.overrides.front() == "parallel.tensor=2";
  });
  ASSERT_NE(tp, knobs.end());
  EXPECT_EQ(tp->overrides, std::vector<std::string>{"parallel.tensor=2"});
  const auto half = std::find_if(knobs.begin(), knobs.end(), [](const Knob& k) {
    return !k.overrides.empty() && k.overrides.front().starts_with("batch.max_tokens_per_micro");
  });
  ASSERT_NE(half, knobs.end());
  EXPECT_EQ(half->overrides.back(), "batch.global_micro_batches=8");
  EXPECT_FALSE(has(all_overrides(knobs), "batch.grad_accum=2"));
}

TEST(KnobCatalogue, TruncatesAtTheNinetyNinthPercentileAndCountsWhatIsCut) {
  ExperimentConfig c = gpu_config();
  std::vector<int64_t> lengths(200, 100);
  lengths[0] = 5000;
  lengths[1] = 3000;
  lengths[2] = 150;
  // Nearest rank: the 198th of 200 sorted lengths is 150.
  const std::vector<Knob> knobs = knob_catalogue(c, 1, lengths);
  const auto cut = std::find_if(knobs.begin(), knobs.end(), [](const Knob& k) {
    return k.overrides.front().starts_with("data.max_sample_tokens");
  });
  ASSERT_NE(cut, knobs.end());
  EXPECT_EQ(cut->overrides.front(), "data.max_sample_tokens=150");
  EXPECT_EQ(cut->effect, KnobEffect::kChangesTraining);
  EXPECT_NE(cut->note.find("truncates 2 of 200 documents (7700 tokens)"), std::string::npos)
      << cut->note;
}

TEST(KnobCatalogue, EveryKnobLoadsAsTheConfigWithItsSetValues) {
  ExperimentConfig c = gpu_config();
  c.lora.enabled = true;
  c.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  c.attention.backend = AttentionSection::Backend::kDenseAdditive;
  for (const Knob& knob : knob_catalogue(c, 4, std::vector<int64_t>(100, 64))) {
    SCOPED_TRACE(knob.what);
    ExperimentConfig changed;
    ASSERT_NO_THROW(changed = load_config_string(to_toml(c), "test", knob.overrides));
    EXPECT_FALSE(changed == c) << "a knob that changes nothing";
  }
}

TEST(KnobCatalogue, TurnsOnlyKeysOfTheSchema) {
  for (const KnobSpec& spec : knob_table())
    EXPECT_NE(find_config_key(spec.key), nullptr) << spec.key;
}

TEST(KnobCatalogue, TakesWhatAChangeNeedsBesideItFromTheRules) {
  ExperimentConfig c = gpu_config();
  c.zero.stage = 0;
  const std::vector<Knob> knobs = knob_catalogue(c, 1, {});
  const auto offload = std::find_if(knobs.begin(), knobs.end(), [](const Knob& k) {
    return has(k.overrides, "zero.offload_optimizer=true");
  });
  ASSERT_NE(offload, knobs.end());
  EXPECT_EQ(offload->overrides,
            (std::vector<std::string>{"zero.stage=1", "zero.offload_optimizer=true"}))
      << "the rule's companion first, as a user sets the requirement";
  const auto qlora = std::find_if(knobs.begin(), knobs.end(), [](const Knob& k) {
    return has(k.overrides, "model.quantization=nf4");
  });
  ASSERT_NE(qlora, knobs.end());
  std::vector<std::string> expected = adapter_sets();
  expected.insert(expected.end(), {"model.quantization=nf4", "model.double_quant=true"});
  EXPECT_EQ(qlora->overrides, expected) << "NF4 requires LoRA: its adapters come along";

  c.zero.stage = 1;
  for (const Knob& k : knob_catalogue(c, 1, {}))
    EXPECT_FALSE(has(k.overrides, "zero.stage=1")) << k.what << ": stage 1 already";
  c.lora.enabled = true;
  for (const Knob& k : knob_catalogue(c, 1, {})) {
    if (has(k.overrides, "model.quantization=nf4")) {
      EXPECT_EQ(k.overrides.size(), 2u) << "LoRA already on: only the base's 4 bits";
    }
  }
}

TEST(KnobCatalogue, LeavesOutAChangeThatBreaksARuleWithoutCompanions) {
  ExperimentConfig c = gpu_config();
  c.zero.stage = 3;  // NF4 requires zero.stage <= 2, and lowering the stage adds memory
  for (const Knob& k : knob_catalogue(c, 4, {}))
    EXPECT_FALSE(has(k.overrides, "model.quantization=nf4")) << k.what;
}

TEST(KnobCatalogue, RuleCompanionsSatisfyTheirRules) {
  for (const ConfigRule& rule : config_rules())
    for (const std::string& companion : rule.companions) {
      SCOPED_TRACE(rule.doc);
      EXPECT_NO_THROW(with_overrides_unchecked(ExperimentConfig{}, {companion})) << companion;
    }
  // The two rules that have companions, broken and then completed.
  ExperimentConfig offload;
  offload.zero.offload_optimizer = true;
  ASSERT_EQ(broken_rules(offload).size(), 1u);
  EXPECT_TRUE(
      broken_rules(with_overrides_unchecked(offload, broken_rules(offload).front()->companions))
          .empty());
  ExperimentConfig nf4;
  nf4.model.quantization = ModelSection::Quantization::kNf4;
  ASSERT_EQ(broken_rules(nf4).size(), 1u);
  EXPECT_TRUE(
      broken_rules(with_overrides_unchecked(nf4, broken_rules(nf4).front()->companions)).empty());
}

}  // namespace
}  // namespace headroom
