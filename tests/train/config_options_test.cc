// Every key of the config schema reaches the run: for each key, a config
// with another valid value of it maps (train/config_options.h) to other
// settings than the config without it, or is refused with the key named.
// A key added to config/schema.cc without a case below fails here, and so
// does a key whose value the mapping drops (as optimizer.master_dtype and
// run.seed once were).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/schema.h"
#include "test_util/temp_dir.h"
#include "train/config_options.h"
#include "util/error.h"

namespace headroom {
namespace {

// A key's case: `value` (TOML) differs from the key's value in `context`
// (other overrides the value needs to be valid or to matter, applied to
// both sides).
struct KeyCase {
  KeyCase(std::string v, std::vector<std::string> c = {}, bool r = false)
      : value(std::move(v)), context(std::move(c)), refused(r) {}

  std::string value;
  std::vector<std::string> context;
  // The value is one this build refuses (config_options.h): the mapping
  // must throw naming the key, in every mode.
  bool refused;
};

// A Hugging Face config.json of `hidden` width, for model.hf_config.
std::string write_hf_config(const testing::TempDir& dir, const std::string& name, int hidden) {
  const std::string path = dir.file(name);
  std::ofstream(path)
      << R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 64, "hidden_size": )" << hidden
      << R"(, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "tie_word_embeddings": true})";
  return path;
}

std::map<std::string, KeyCase> key_cases(const std::string& hf_a, const std::string& hf_b) {
  const std::string a = "\"" + hf_a + "\"", b = "\"" + hf_b + "\"";
  return {
      {"run.name", {"\"other\""}},
      {"run.seed", {"99"}},
      {"run.steps", {"7"}},
      // a plan makes a cuda device's allocations.
      {"run.backend", {"\"cuda\""}},
      {"run.out_dir", {"\"elsewhere\""}},
      {"run.collective_timeout", {"\"5s\""}},

      {"model.preset", {"\"tiny-llama\""}},
      {"model.hf_config", {b, {"model.preset=\"\"", "model.hf_config=" + a}}},
      {"model.weights", {"\"base.safetensors\""}},
      {"model.dtype", {"\"bf16\""}},
      {"model.seed", {"99"}},
      {"model.quantization", {"\"nf4\"", {"lora.enabled=true"}}},
      {"model.double_quant", {"true", {"lora.enabled=true", "model.quantization=\"nf4\""}}},

      {"lora.enabled", {"true"}},
      {"lora.rank", {"4"}},
      {"lora.alpha", {"8.0"}},
      {"lora.dropout", {"0.25"}},
      {"lora.targets", {"[\"down_proj\"]"}},
      {"lora.init", {"\"gaussian\""}},
      {"lora.seed", {"99"}},

      {"data.path", {"\"corpus.h5\""}},
      {"data.max_sample_tokens", {"100"}},
      {"data.shuffle", {"false"}},
      {"data.seed", {"99"}},
      {"data.synthesize_if_missing", {"true"}},
      {"data.synthetic_documents", {"99"}},
      {"data.synthetic_lengths", {"\"fixed:100\""}},

      {"batch.mode", {"\"padded\"", {"batch.micro_batch_size=2"}}},
      {"batch.packing", {"\"next_fit\""}},
      {"batch.packing_window", {"99"}},
      {"batch.max_tokens_per_micro_batch", {"99"}},
      {"batch.pad_to_multiple_of", {"64"}},
      {"batch.micro_batch_size", {"3"}},
      {"batch.grad_accum", {"3"}},
      {"batch.global_micro_batches", {"3"}},
      {"batch.seq_len", {"99"}},
      {"batch.buckets", {"[64, 128]", {"batch.mode=\"padded\"", "batch.micro_batch_size=2"}}},
      {"batch.pad_to", {"\"longest\""}},
      {"batch.group_pool", {"50", {"batch.mode=\"padded\"", "batch.micro_batch_size=2"}}},

      {"attention.backend", {"\"dense_additive\""}},
      {"attention.mask", {"\"causal\""}},
      {"attention.block_size", {"32"}},
      {"attention.window", {"32", {"attention.mask=\"sliding_window\"", "attention.window=16"}}},
      {"attention.mask_block",
       {"8", {"attention.mask=\"dflash_block\"", "attention.mask_block=16"}}},

      {"loss.chunk_size", {"99"}},
      {"loss.mode", {"\"save\""}},
      {"loss.logits_dtype", {"\"bf16\"", {"model.dtype=\"bf16\""}}},

      {"memory.device_capacity", {"\"1GiB\""}},
      // A preset names a GPU: refused with run.backend = "cpu", the default.
      {"memory.device", {"\"a100-40gb\"", {"run.backend=\"meta\""}}},
      {"memory.allocator", {"\"exact\""}},

      {"zero.stage", {"2"}},
      {"zero.prefetch", {"3"}},
      {"zero.offload_optimizer", {"true", {"zero.stage=1"}}},
      {"parallel.tensor", {"2"}},
      {"parallel.sequence", {"true", {"parallel.tensor=2"}}},

      {"checkpoint.activations", {"\"full\""}},
      {"checkpoint.save_every", {"5"}},
      {"checkpoint.dir", {"\"ckpt\""}},
      {"checkpoint.format", {"\"sharded\""}},
      {"checkpoint.save_initial", {"true"}},
      {"checkpoint.resume_from", {"\"ckpt/step-2\""}},
      {"checkpoint.resume", {"\"auto\""}},

      {"optimizer.lr", {"0.01"}},
      {"optimizer.betas", {"[0.8, 0.99]"}},
      {"optimizer.eps", {"1e-6"}},
      {"optimizer.weight_decay", {"0.5"}},
      {"optimizer.grad_clip", {"0.5"}},
      {"optimizer.kind", {"\"adamw_8bit\""}},
      {"optimizer.master_dtype", {"\"none\"", {"model.dtype=\"bf16\""}}},
      {"optimizer.max_nonfinite_steps", {"3"}},
      {"optimizer.loss_scale", {"\"dynamic\""}},

      {"schedule.warmup_steps", {"2"}},
      {"schedule.decay", {"\"linear\""}},
      {"schedule.min_lr", {"1e-5"}},

      {"trace.memory_events", {"false"}},
      {"trace.flush_every", {"5"}},
  };
}

// The settings `config` maps to in `mode`, or the refusal's message.
struct Mapped {
  std::string text;
  std::string refusal;
};

Mapped map(const ExperimentConfig& config, RunMode mode) {
  try {
    // A tensor-parallel config as rank 0 of one group (world = its size).
    return {to_text(run_settings_of(config, mode, config.parallel.tensor, 0)), ""};
  } catch (const UsageError& e) {
    return {"", e.what()};
  }
}

TEST(ConfigOptions, EverySchemaKeyReachesTheRun) {
  testing::TempDir dir;
  const std::map<std::string, KeyCase> cases =
      key_cases(write_hf_config(dir, "a.json", 32), write_hf_config(dir, "b.json", 40));
  std::set<std::string> schema_keys;
  for (const ConfigKey& key : config_schema()) {
    schema_keys.insert(key.name);
    auto found = cases.find(key.name);
    if (found == cases.end()) {
      ADD_FAILURE() << key.name
                    << ": a schema key without a case here: map it to the run's settings in "
                       "src/train/config_options.cc (or refuse its values there), then add a value "
                       "that changes them to key_cases()";
      continue;
    }
    SCOPED_TRACE(key.name + " = " + found->second.value);
    const KeyCase& c = found->second;
    std::vector<std::string> with = c.context;
    with.push_back(key.name + "=" + c.value);
    const ExperimentConfig base = load_config_string("", "<test>", c.context);
    const ExperimentConfig changed = load_config_string("", "<test>", with);
    ASSERT_NE(key.get(base), key.get(changed)) << "the case's value is the key's value already";

    bool reached = false;
    for (RunMode mode : {RunMode::kTrain, RunMode::kPlan}) {
      const Mapped before = map(base, mode), after = map(changed, mode);
      ASSERT_EQ(before.refusal, "") << "the context alone is refused";
      if (!after.refusal.empty()) {
        EXPECT_NE(after.refusal.find(key.name), std::string::npos)
            << "refused without naming the key: " << after.refusal;
        reached = true;
      } else {
        EXPECT_FALSE(c.refused) << "a value the mapping should refuse maps";
        reached = reached || after.text != before.text;
      }
    }
    EXPECT_TRUE(reached) << "the value changes nothing the run is given";
  }
  for (const auto& [name, c] : cases)
    EXPECT_TRUE(schema_keys.contains(name)) << name << ": a case for a key the schema lacks";
}

// The mapping itself, on a few keys whose route is not a plain copy.
TEST(ConfigOptions, ModeBackendAndPathsAreDerivedAsTheRunUsesThem) {
  const ExperimentConfig cuda =
      load_config_string("", "<test>",
                         {"run.backend=\"cuda\"", "run.out_dir=\"out\"", "run.name=\"x\"",
                          "checkpoint.resume_from=\"out/x/checkpoints/step-2\""});
  const RunSettings plan = run_settings_of(cuda, RunMode::kPlan);
  EXPECT_EQ(plan.backend, BackendKind::kMeta);
  EXPECT_EQ(plan.target, TargetDevice::kCuda);
  EXPECT_EQ(plan.run_dir, std::filesystem::path("out/x"));
  EXPECT_EQ(plan.checkpoint_dir, std::filesystem::path("out/x/checkpoints"));
  EXPECT_EQ(plan.resume_from, "") << "a plan reads no checkpoint";
  // A cuda training maps to the cuda table on the cuda target; whether it
  // can run here is the run's first check (tests/cli/target_device_test.cc).
  const RunSettings on_gpu = run_settings_of(cuda, RunMode::kTrain);
  EXPECT_EQ(on_gpu.backend, BackendKind::kCuda);
  EXPECT_EQ(on_gpu.target, TargetDevice::kCuda);
  const RunSettings train = run_settings_of(load_config_string("", "<test>", {}), RunMode::kTrain);
  EXPECT_EQ(train.backend, BackendKind::kCpu);
  EXPECT_EQ(train.target, TargetDevice::kHostCpu);
  EXPECT_EQ(train.trainer.schedule.total_steps, train.steps);

  try {
    run_settings_of(load_config_string("", "<test>", {"data.synthetic_lengths=\"uniform:9\""}),
                    RunMode::kPlan);
    ADD_FAILURE() << "a bad data.synthetic_lengths maps";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("data.synthetic_lengths = \"uniform:9\": ", 0), 0u)
        << e.what();
  }
}

TEST(ConfigOptions, GlobalMicroBatchesAreDealtOverTheDataParallelRanks) {
  const ExperimentConfig global =
      load_config_string("", "<test>", {"batch.global_micro_batches=12"});
  EXPECT_EQ(grad_accum_of(global, 1), 12);
  EXPECT_EQ(grad_accum_of(global, 4), 3);
  EXPECT_EQ(grad_accum_of(global, 12), 1);
  // The batcher deals world_size * grad_accum bins a step: 12 on any size.
  for (int ranks : {1, 2, 3, 4, 6}) {
    const RunSettings s = run_settings_of(global, RunMode::kPlan, ranks, 0);
    EXPECT_EQ(s.batch.world_size * s.batch.grad_accum, 12) << ranks << " ranks";
  }
  const ExperimentConfig per_rank = load_config_string("", "<test>", {"batch.grad_accum=3"});
  EXPECT_EQ(grad_accum_of(per_rank, 4), 3) << "batch.grad_accum is per rank";

  try {
    run_settings_of(global, RunMode::kPlan, 8, 0);
    ADD_FAILURE() << "12 micro-batches over 8 ranks";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "batch.global_micro_batches = 12 is not a multiple of the job's 8 data-parallel "
              "ranks: every rank accumulates the same number of micro-batches a step; choose a "
              "multiple of every world size the run may be requeued on");
  }
  // Under parallel.tensor the data-parallel ranks are the groups.
  const ExperimentConfig grouped =
      load_config_string("", "<test>", {"batch.global_micro_batches=3", "parallel.tensor=2"});
  try {
    grad_accum_of(grouped, 2);
    ADD_FAILURE() << "3 micro-batches over 2 groups";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the job's 2 data-parallel ranks (4 ranks in "
                                         "tensor-parallel groups of parallel.tensor = 2)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace headroom
